#include "serve/openai_api.h"

#include <fmt/format.h>

#include <random>
#include <set>

namespace dspark::serve {
using json = nlohmann::json;

namespace {

[[noreturn]] void invalid(const std::string& message) { throw ApiError(400, "invalid_request_error", message); }

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

int64_t get_int(const json& v, const char* field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() && !(v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>()))))
    invalid(fmt::format("'{}' must be an integer, got {}", field, type_name(v)));
  const double d = v.get<double>();
  if (d < double(lo) || d > double(hi)) invalid(fmt::format("'{}' must be in [{}, {}]", field, lo, hi));
  return v.is_number_integer() ? v.get<int64_t>() : int64_t(d);
}

double get_number(const json& v, const char* field, double lo, double hi) {
  if (!v.is_number()) invalid(fmt::format("'{}' must be a number, got {}", field, type_name(v)));
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi)) invalid(fmt::format("'{}' must be in [{}, {}]", field, lo, hi));
  return d;
}

bool get_bool(const json& v, const char* field) {
  if (!v.is_boolean()) invalid(fmt::format("'{}' must be a boolean, got {}", field, type_name(v)));
  return v.get<bool>();
}

std::string get_string(const json& v, const char* field) {
  if (!v.is_string()) invalid(fmt::format("'{}' must be a string, got {}", field, type_name(v)));
  return v.get<std::string>();
}

// Message content: a string, or OpenAI's array of parts of which only text parts are supported.
std::string message_content(const json& v, size_t index) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (!v.is_array()) invalid(fmt::format("messages[{}].content must be a string or an array of text parts", index));
  std::string text;
  for (const auto& part : v) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      invalid(fmt::format("messages[{}].content: only {{\"type\": \"text\", \"text\": ...}} parts are supported", index));
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

json ApiError::body() const {
  json error = {{"code", status}, {"message", what()}, {"type", type}};
  for (auto& [k, v] : extra.items()) error[k] = v;
  return {{"error", error}};
}

CompletionParams parse_completion_request(const std::string& body, bool chat) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) invalid("the request body is not valid JSON");
  if (!j.is_object()) invalid("the request body must be a JSON object");
  CompletionParams p;
  p.chat = chat;
  p.sampling.temperature = 1.0;
  // Accepted but without effect here: they would change nothing in the output.
  static const std::set<std::string> ignored = {"user", "logprobs", "top_logprobs", "presence_penalty",
                                                "frequency_penalty", "echo", "n", "response_format", "logit_bias"};
  static const std::set<std::string> common = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed",
                                               "stop", "stream", "stream_options"};
  for (auto& [key, value] : j.items()) {
    const bool own = chat ? (key == "messages" || key == "max_completion_tokens") : key == "prompt";
    if (!own && !common.count(key) && !ignored.count(key))
      invalid(fmt::format("unknown field '{}'", key));
  }
  // Values of the ignored fields must be the neutral ones.
  if (j.contains("n") && !j["n"].is_null() && get_int(j["n"], "n", 1, 1) != 1) invalid("only n = 1 is supported");
  if (j.contains("echo") && !j["echo"].is_null() && get_bool(j["echo"], "echo")) invalid("echo is not supported");
  for (const char* f : {"presence_penalty", "frequency_penalty"})
    if (j.contains(f) && !j[f].is_null() && get_number(j[f], f, -2.0, 2.0) != 0.0)
      invalid(fmt::format("'{}' is not supported (it would change the target's distribution)", f));
  if (j.contains("logprobs") && !j["logprobs"].is_null() && !(j["logprobs"].is_boolean() && !j["logprobs"].get<bool>()) &&
      !(j["logprobs"].is_number_integer() && j["logprobs"].get<int64_t>() == 0))
    invalid("logprobs are not supported");
  if (j.contains("response_format") && !j["response_format"].is_null()) {
    const json& rf = j["response_format"];
    if (!rf.is_object() || rf.value("type", "") != "text") invalid("only response_format {\"type\": \"text\"} is supported");
  }
  if (j.contains("logit_bias") && !j["logit_bias"].is_null() && !(j["logit_bias"].is_object() && j["logit_bias"].empty()))
    invalid("logit_bias is not supported");

  if (j.contains("model") && !j["model"].is_null()) p.model = get_string(j["model"], "model");
  if (chat) {
    if (!j.contains("messages")) invalid("'messages' is required");
    const json& m = j["messages"];
    if (!m.is_array() || m.empty()) invalid("'messages' must be a non-empty array");
    for (size_t i = 0; i < m.size(); ++i) {
      if (!m[i].is_object()) invalid(fmt::format("messages[{}] must be an object", i));
      if (!m[i].contains("role") || !m[i]["role"].is_string()) invalid(fmt::format("messages[{}].role must be a string", i));
      if (!m[i].contains("content")) invalid(fmt::format("messages[{}].content is required", i));
      for (auto& [key, value] : m[i].items())
        if (key != "role" && key != "content" && key != "name") invalid(fmt::format("messages[{}]: unknown field '{}'", i, key));
      p.messages.push_back({m[i]["role"].get<std::string>(), message_content(m[i]["content"], i)});
    }
  } else {
    if (!j.contains("prompt")) invalid("'prompt' is required");
    const json& pr = j["prompt"];
    if (pr.is_string()) {
      p.prompt = pr.get<std::string>();
    } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
      p.prompt = pr[0].get<std::string>();
    } else if (pr.is_array() && !pr.empty() && pr[0].is_number_integer()) {
      std::vector<int64_t> ids;
      for (const auto& t : pr) ids.push_back(get_int(t, "prompt", 0, INT32_MAX));
      p.prompt_tokens = std::move(ids);
    } else {
      invalid("'prompt' must be a string, a list of one string or a list of token ids");
    }
  }
  for (const char* f : {"max_tokens", "max_completion_tokens"})
    if (j.contains(f) && !j[f].is_null()) p.max_tokens = get_int(j[f], f, 0, INT32_MAX);
  if (j.contains("temperature") && !j["temperature"].is_null())
    p.sampling.temperature = get_number(j["temperature"], "temperature", 0.0, 100.0);
  if (j.contains("top_p") && !j["top_p"].is_null()) {
    p.sampling.top_p = get_number(j["top_p"], "top_p", 0.0, 1.0);
    if (p.sampling.top_p <= 0.0) invalid("'top_p' must be in (0, 1]");
  }
  if (j.contains("top_k") && !j["top_k"].is_null())
    p.sampling.top_k = std::max<int64_t>(0, get_int(j["top_k"], "top_k", -1, INT32_MAX));  // -1, 0: off
  if (j.contains("seed") && !j["seed"].is_null()) {
    p.sampling.seed = uint64_t(get_int(j["seed"], "seed", INT64_MIN, INT64_MAX));
    p.seeded = true;
  }
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& s = j["stop"];
    if (s.is_string()) {
      p.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      for (const auto& x : s) p.stop.push_back(get_string(x, "stop"));
    } else {
      invalid("'stop' must be a string or a list of strings");
    }
  }
  if (j.contains("stream") && !j["stream"].is_null()) p.stream = get_bool(j["stream"], "stream");
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& so = j["stream_options"];
    if (!so.is_object()) invalid("'stream_options' must be an object");
    for (auto& [key, value] : so.items()) {
      if (key != "include_usage") invalid(fmt::format("stream_options: unknown field '{}'", key));
      p.include_usage = get_bool(value, "stream_options.include_usage");
    }
  }
  return p;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json timings_json(const SpecResult& result, int64_t prompt_tokens) {
  const SpecStats& s = result.stats;
  const double prompt_ms = s.prefill_seconds * 1e3;
  const double predicted_ms = (s.seconds - s.prefill_seconds) * 1e3;
  const int64_t predicted = int64_t(result.tokens.size());
  json t = {{"prompt_n", prompt_tokens},
            {"prompt_ms", prompt_ms},
            {"prompt_per_token_ms", prompt_tokens > 0 ? prompt_ms / double(prompt_tokens) : 0.0},
            {"prompt_per_second", prompt_ms > 0 ? 1e3 * double(prompt_tokens) / prompt_ms : 0.0},
            {"predicted_n", predicted},
            {"predicted_ms", predicted_ms},
            {"predicted_per_token_ms", predicted > 0 ? predicted_ms / double(predicted) : 0.0},
            {"predicted_per_second", predicted_ms > 0 ? 1e3 * double(predicted) / predicted_ms : 0.0}};
  if (s.n_drafted > 0) {
    t["draft_n"] = s.n_drafted;
    t["draft_n_accepted"] = s.n_accepted;
    t["num_spec_steps"] = s.steps;  // verify forwards (vLLM's name); tau = 1 + accepted / steps
    t["tau"] = s.tau();
    t["acceptance_per_position"] = s.acceptance_per_position();
  }
  return t;
}

std::string new_completion_id(bool chat) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = chat ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 32; ++i) id += alphabet[rng() % (sizeof(alphabet) - 1)];
  return id;
}

}  // namespace dspark::serve
