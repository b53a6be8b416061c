// The OpenAI-compatible request and response shapes of `dspark serve` (/v1/completions,
// /v1/chat/completions), following OpenAI's API and llama.cpp's server where they agree:
// errors are {"error": {"code": HTTP status, "message", "type"}}, responses carry `usage` and
// llama.cpp's `timings` with the speculative fields (draft_n, draft_n_accepted, tau, acceptance
// per position).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "serve/chat_template.h"
#include "spec/speculative.h"

namespace dspark::serve {

// An error answered to the client: HTTP status and OpenAI error type (invalid_request_error 400,
// not_found_error 404, server_error 500, not_supported_error 501, unavailable_error 503,
// exceed_context_size_error 400).
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, nlohmann::json extra = nlohmann::json::object())
      : std::runtime_error(message), status(status), type(std::move(type)), extra(std::move(extra)) {}
  nlohmann::json body() const;
  int status;
  std::string type;
  nlohmann::json extra;  // more fields of the error object (n_prompt_tokens, n_ctx)
};

struct CompletionParams {
  bool chat = false;
  std::string prompt;                       // completions: text prompt
  std::optional<std::vector<int64_t>> prompt_tokens;  // completions: a prompt given as token ids
  std::vector<ChatMessage> messages;        // chat
  std::optional<int64_t> max_tokens;        // absent: 16 for completions, the context for chat
  SamplingParams sampling;                  // temperature 1, top_p 1, top_k off (OpenAI's defaults)
  bool seeded = false;                      // `seed` given (else a fresh random seed)
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;               // stream_options.include_usage
  std::string model;
};

// Parses and validates a request body. Unknown fields, wrong types and out-of-range values throw
// ApiError 400 with a message naming the field.
CompletionParams parse_completion_request(const std::string& body, bool chat);

// {"prompt_tokens", "completion_tokens", "total_tokens"}
nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
// llama.cpp's timings object plus the speculative fields (draft_n / draft_n_accepted only when
// drafts were verified).
nlohmann::json timings_json(const SpecResult& result, int64_t prompt_tokens);
// "cmpl-..." / "chatcmpl-..." + 32 random alphanumerics.
std::string new_completion_id(bool chat);

}  // namespace dspark::serve
