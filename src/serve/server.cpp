#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <optional>
#include <random>

#include "serve/openai_api.h"
#include "serve/stop_strings.h"
#include "util/error.h"

namespace dspark::serve {
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// One request's text as it is generated: detokenized without EOS, cut at stop strings. The
// engine's worker writes (on_token), the request's HTTP thread reads.
class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, std::mutex& tokenizer_mutex, const std::vector<int64_t>& eos_ids,
             std::vector<std::string> stops)
      : tokenizer_mutex_(tokenizer_mutex), eos_ids_(eos_ids), decoder_(tokenizer), stop_(std::move(stops)) {}

  // Worker thread. False once a stop string is complete: the engine then ends the request.
  bool on_token(int64_t token) {
    std::lock_guard lock(mutex_);
    if (!first_token_at_) first_token_at_ = Clock::now();
    if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) return true;
    std::string piece;
    {
      std::lock_guard tok(tokenizer_mutex_);
      piece = decoder_.push(TokenId(token));
    }
    ready_ += stop_.push(piece);
    cv_.notify_all();
    return !stop_.matched();
  }

  // Text that became ready, waiting up to `timeout` for some.
  std::string take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return !ready_.empty(); });
    return std::exchange(ready_, {});
  }

  // After the request finished (no more on_token calls): everything not yet taken.
  std::string finish() {
    std::lock_guard lock(mutex_);
    std::string tail;
    {
      std::lock_guard tok(tokenizer_mutex_);
      tail = decoder_.flush();
    }
    std::string out = std::exchange(ready_, {}) + stop_.push(tail);
    return out + stop_.flush();
  }

  std::optional<Clock::time_point> first_token_at() {
    std::lock_guard lock(mutex_);
    return first_token_at_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::mutex& tokenizer_mutex_;
  const std::vector<int64_t>& eos_ids_;
  StreamingDecoder decoder_;
  StopMatcher stop_;
  std::string ready_;
  std::optional<Clock::time_point> first_token_at_;
};

std::string sse(const json& event) { return "data: " + event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; }

}  // namespace

struct Server::Impl {
  Engine& engine;
  const Transformer& target;
  const Tokenizer& tokenizer;
  ModelChatTemplate chat;
  std::vector<int64_t> eos_ids;
  ServerOptions options;
  std::mutex tokenizer_mutex;
  ServerMetrics metrics;
  const int64_t created = unix_seconds();

  std::vector<int64_t> encode(const std::string& text, bool add_special) {
    std::lock_guard lock(tokenizer_mutex);
    std::vector<TokenId> ids = tokenizer.encode(text, add_special);
    return {ids.begin(), ids.end()};
  }

  std::vector<int64_t> prompt_tokens(const CompletionParams& p) {
    std::vector<int64_t> ids;
    if (p.chat) {
      std::string text;
      try {
        text = chat.chat_template.render(p.messages, /*add_generation_prompt=*/true, chat.extra);
      } catch (const Error& e) {
        throw ApiError(400, "invalid_request_error", std::string("chat template: ") + e.what());
      }
      // A model's template writes its own BOS; the plain template relies on the tokenizer's.
      ids = encode(text, /*add_special=*/chat.is_plain);
    } else if (p.prompt_tokens) {
      ids = *p.prompt_tokens;
      for (int64_t t : ids)
        if (t >= target.config().vocab_size)
          throw ApiError(400, "invalid_request_error", fmt::format("prompt token {} is outside the vocabulary", t));
    } else {
      ids = encode(p.prompt, /*add_special=*/true);
    }
    if (ids.empty()) {
      if (auto bos = tokenizer.bos_id()) ids.push_back(*bos);
      else throw ApiError(400, "invalid_request_error", "the prompt is empty");
    }
    if (int64_t(ids.size()) >= engine.context())
      throw ApiError(400, "exceed_context_size_error",
                     fmt::format("request ({} tokens) exceeds the available context size ({} tokens), try increasing it",
                                 ids.size(), engine.context()),
                     {{"n_prompt_tokens", ids.size()}, {"n_ctx", engine.context()}});
    return ids;
  }

  void completion(const httplib::Request& req, httplib::Response& res, bool chat_api) {
    CompletionParams p = parse_completion_request(req.body, chat_api);
    std::vector<int64_t> prompt = prompt_tokens(p);
    const int64_t n_prompt = int64_t(prompt.size());
    const int64_t room = engine.context() - n_prompt;
    const int64_t max_new = std::min(room, p.max_tokens.value_or(chat_api ? room : 16));
    if (!p.seeded) p.sampling.seed = std::random_device{}() * uint64_t(0x9E3779B97F4A7C15ull) + uint64_t(unix_seconds());
    auto text = std::make_shared<TextStream>(tokenizer, tokenizer_mutex, eos_ids, p.stop);
    GenerationRequest request;
    request.prompt = std::move(prompt);
    request.max_new_tokens = max_new;
    request.sampling = p.sampling;
    request.on_token = [text](int64_t token) { return text->on_token(token); };
    std::shared_ptr<RequestState> state;
    try {
      state = engine.submit(std::move(request));
    } catch (const Error& e) {  // shutting down, queue full (the request itself was checked above)
      throw ApiError(503, "unavailable_error", e.what());
    }
    const std::string id = new_completion_id(chat_api);
    const int64_t created_at = unix_seconds();
    const std::string object = chat_api ? "chat.completion" : "text_completion";
    auto finish_reason = [state] {
      return state->finish_reason() == FinishReason::Length ? "length" : "stop";
    };
    auto check_failed = [state] {
      if (state->finish_reason() == FinishReason::Cancelled)
        throw ApiError(503, "unavailable_error", "the request was cancelled: the server is shutting down");
      if (state->finish_reason() == FinishReason::Error) throw ApiError(500, "server_error", state->error());
    };
    auto observe = [this, state, text] {
      metrics.e2e_latency.observe(seconds_between(state->submitted_at(), state->finished_at()));
      if (auto first = text->first_token_at()) metrics.time_to_first_token.observe(seconds_between(state->submitted_at(), *first));
    };

    if (!p.stream) {
      state->wait();
      check_failed();
      const std::string content = text->finish();
      json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason()}};
      if (chat_api) choice["message"] = {{"role", "assistant"}, {"content", content}};
      else choice["text"] = content;
      const SpecResult& r = state->result();
      json body = {{"id", id},
                   {"object", object},
                   {"created", created_at},
                   {"model", options.model_id},
                   {"choices", json::array({choice})},
                   {"usage", usage_json(n_prompt, int64_t(r.tokens.size()))},
                   {"timings", timings_json(r, n_prompt)}};
      observe();
      res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
      return;
    }

    // Streaming: one SSE event per piece of text; all chunks share id and created.
    const std::string chunk_object = chat_api ? "chat.completion.chunk" : "text_completion";
    auto chunk = [=, this](const json& delta_or_text, const json& finish) {
      json choice = {{"index", 0}, {"finish_reason", finish}};
      if (chat_api) choice["delta"] = delta_or_text;
      else {
        choice["text"] = delta_or_text;
        choice["logprobs"] = nullptr;
      }
      return json{{"id", id}, {"object", chunk_object}, {"created", created_at}, {"model", options.model_id},
                  {"choices", json::array({choice})}};
    };
    auto content_chunk = [=](const std::string& piece) {
      return chat_api ? chunk(json{{"content", piece}}, nullptr) : chunk(piece, nullptr);
    };
    auto started = std::make_shared<bool>(false);
    const bool include_usage = p.include_usage;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [=, this](size_t, httplib::DataSink& sink) {
          auto write = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
          if (!*started) {
            *started = true;
            if (chat_api && !write(sse(chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr)))) return false;
          }
          const std::string piece = text->take(std::chrono::milliseconds(20));
          if (!piece.empty() && !write(sse(content_chunk(piece)))) return false;  // client gone: releaser cancels
          if (!state->finished()) return true;
          std::string tail = text->finish();
          std::string out;
          const FinishReason reason = state->finish_reason();
          if (reason == FinishReason::Cancelled || reason == FinishReason::Error) {
            const ApiError error = reason == FinishReason::Error
                                       ? ApiError(500, "server_error", state->error())
                                       : ApiError(503, "unavailable_error", "the request was cancelled: the server is shutting down");
            out += sse(error.body());
          } else {
            if (!tail.empty()) out += sse(content_chunk(tail));
            json last = chat_api ? chunk(json::object(), finish_reason()) : chunk("", finish_reason());
            const SpecResult& r = state->result();
            last["timings"] = timings_json(r, n_prompt);
            out += sse(last);
            if (include_usage) {
              json usage = {{"id", id}, {"object", chunk_object}, {"created", created_at}, {"model", options.model_id},
                            {"choices", json::array()}, {"usage", usage_json(n_prompt, int64_t(r.tokens.size()))}};
              out += sse(usage);
            }
            out += "data: [DONE]\n\n";
            observe();
          }
          if (!write(out)) return false;
          sink.done();
          return true;
        },
        [this, state](bool success) {
          if (!success && !state->finished()) {
            state->cancel();  // the client went away: free the slot
            std::lock_guard lock(metrics.mutex);
            ++metrics.cancelled;
          }
        });
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    const json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
    for (auto& [key, value] : j.items())
      if (key != "content" && key != "add_special" && key != "with_pieces" && key != "parse_special")
        throw ApiError(400, "invalid_request_error", fmt::format("unknown field '{}'", key));
    if (!j.contains("content") || !j["content"].is_string())
      throw ApiError(400, "invalid_request_error", "'content' must be a string");
    for (const char* f : {"add_special", "with_pieces", "parse_special"})
      if (j.contains(f) && !j[f].is_boolean()) throw ApiError(400, "invalid_request_error", fmt::format("'{}' must be a boolean", f));
    const std::vector<int64_t> ids = encode(j["content"].get<std::string>(), j.value("add_special", false));
    json tokens = json::array();
    if (j.value("with_pieces", false)) {
      std::lock_guard lock(tokenizer_mutex);
      for (int64_t id : ids) tokens.push_back({{"id", id}, {"piece", tokenizer.decode({TokenId(id)})}});
    } else {
      tokens = ids;
    }
    res.set_content(json{{"tokens", tokens}}.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    const json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
    for (auto& [key, value] : j.items())
      if (key != "tokens") throw ApiError(400, "invalid_request_error", fmt::format("unknown field '{}'", key));
    if (!j.contains("tokens") || !j["tokens"].is_array())
      throw ApiError(400, "invalid_request_error", "'tokens' must be an array of token ids");
    std::vector<TokenId> ids;
    for (const auto& t : j["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= target.config().vocab_size)
        throw ApiError(400, "invalid_request_error", "'tokens' must hold token ids of this model's vocabulary");
      ids.push_back(TokenId(t.get<int64_t>()));
    }
    std::string content;
    {
      std::lock_guard lock(tokenizer_mutex);
      content = tokenizer.decode(ids);
    }
    res.set_content(json{{"content", content}}.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  }

  void models(httplib::Response& res) {
    const ModelConfig& c = target.config();
    json model = {{"id", options.model_id},
                  {"object", "model"},
                  {"created", created},
                  {"owned_by", "dspark"},
                  {"meta", {{"n_vocab", c.vocab_size}, {"n_ctx_train", c.max_position_embeddings},
                            {"n_embd", c.hidden_size}, {"n_ctx", engine.context()}}}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), "application/json");
  }

  // Runs a handler; errors become OpenAI-shaped JSON with the right status.
  template <typename F>
  httplib::Server::Handler guarded(F handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        handler(req, res);
        return;
      } catch (const ApiError& e) {
        reply_error(res, e);
      } catch (const Error& e) {
        reply_error(res, ApiError(400, "invalid_request_error", e.what()));
      } catch (const std::exception& e) {
        reply_error(res, ApiError(500, "server_error", e.what()));
      }
    };
  }

  void reply_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(e.body().dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    std::lock_guard lock(metrics.mutex);
    ++(e.status >= 500 ? metrics.http_errors_5xx : metrics.http_errors_4xx);
  }
};

Server::Server(Engine& engine, const Transformer& target, const Tokenizer& tokenizer, ModelChatTemplate chat_template,
               std::vector<int64_t> eos_ids, ServerOptions options)
    : impl_(new Impl{engine, target, tokenizer, std::move(chat_template), std::move(eos_ids), std::move(options)}),
      http_(std::make_unique<httplib::Server>()) {
  Impl& s = *impl_;
  httplib::Server& http = *http_;
  const int threads = s.options.http_threads > 0 ? s.options.http_threads
                                                  : int(std::max<int64_t>(32, 4 * engine.options().slots));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http.set_payload_max_length(s.options.max_body_bytes);
  http.set_read_timeout(30, 0);
  http.set_write_timeout(30, 0);
  // A worker waits this long for a connection's (next) request before closing it; under load the
  // first request of a fresh connection can take longer than httplib's 5 s default to arrive.
  http.set_keep_alive_timeout(30);
  http.set_keep_alive_max_count(1000);
  // httplib listens with a backlog of 5 (a compile-time constant of the packaged library): a burst
  // of new connections overflows it and the overflowing clients see their connection reset. Keep
  // the listening socket (the library's defaults, SO_REUSEADDR, plus remembering it) and listen
  // again with a deep backlog once it is bound (start()).
  http.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_socket_ = int(sock);
  });
  // Responses go out in several writes (headers, body, SSE events): without TCP_NODELAY, Nagle's
  // algorithm holds them back for the client's delayed ACK (tens of ms per request).
  http.set_tcp_nodelay(true);

  auto health = [](const httplib::Request&, httplib::Response& res) { res.set_content(R"({"status":"ok"})", "application/json"); };
  http.Get("/health", health);
  http.Get("/v1/health", health);
  auto models = s.guarded([&s](const httplib::Request&, httplib::Response& res) { s.models(res); });
  http.Get("/v1/models", models);
  http.Get("/models", models);
  auto completions = s.guarded([&s](const httplib::Request& req, httplib::Response& res) { s.completion(req, res, false); });
  auto chat = s.guarded([&s](const httplib::Request& req, httplib::Response& res) { s.completion(req, res, true); });
  http.Post("/v1/completions", completions);
  http.Post("/completions", completions);
  http.Post("/v1/chat/completions", chat);
  http.Post("/chat/completions", chat);
  http.Post("/tokenize", s.guarded([&s](const httplib::Request& req, httplib::Response& res) { s.tokenize(req, res); }));
  http.Post("/detokenize", s.guarded([&s](const httplib::Request& req, httplib::Response& res) { s.detokenize(req, res); }));
  http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(s.engine.counters(), s.metrics), "text/plain; version=0.0.4");
  });
  // No route, body too large, ...: the same JSON error shape.
  http.set_error_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int status = res.status;
    const std::string type = status == 404 ? "not_found_error" : status >= 500 ? "server_error" : "invalid_request_error";
    const std::string message = status == 404   ? fmt::format("no endpoint {} {}", req.method, req.path)
                                : status == 413 ? "the request body is too large"
                                                : fmt::format("HTTP {}", status);
    res.set_content(ApiError(status, type, message).body().dump(), "application/json");
  });
}

Server::~Server() { stop(); }

int Server::start() {
  if (listener_.joinable()) fail("the server is already running");
  const std::string& host = impl_->options.host;
  if (impl_->options.port == 0) {
    port_ = http_->bind_to_any_port(host);
    if (port_ <= 0) fail("cannot bind to {} (any port)", host);
  } else {
    if (!http_->bind_to_port(host, impl_->options.port))
      fail("cannot bind to {}:{} (in use, or not an address of this machine)", host, impl_->options.port);
    port_ = impl_->options.port;
  }
  if (listen_socket_ >= 0) ::listen(listen_socket_, 1024);
  listener_ = std::thread([this] { http_->listen_after_bind(); });
  return port_;
}

void Server::stop() {
  if (!listener_.joinable()) return;
  http_->stop();
  listener_.join();
}

}  // namespace dspark::serve
