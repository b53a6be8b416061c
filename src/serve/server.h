// `dspark serve`: an OpenAI-compatible HTTP server over the continuous-batching engine.
//
//   POST /v1/completions, /v1/chat/completions (also without /v1): JSON or SSE streams
//   GET  /health, /v1/models, /metrics;  POST /tokenize, /detokenize
//
// HTTP threads parse and validate requests, tokenize, and submit them to the Engine; the
// engine's worker calls back with every emitted token, which is detokenized, checked against the
// request's stop strings, and handed to the waiting HTTP thread (whole response or SSE chunks).
// A client that goes away mid-stream cancels its request. Binds to 127.0.0.1 by default.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "serve/chat_template.h"
#include "serve/metrics.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace dspark::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (see Server::port())
  std::string model_id = "dspark";  // `model` in responses and /v1/models
  int http_threads = 0;             // 0: max(32, 4 x slots)
  size_t max_body_bytes = 8 << 20;
};

class Server {
 public:
  // `engine`, `tokenizer` and `target` must outlive the server. `eos_ids` end generation and
  // never appear in the text.
  Server(Engine& engine, const Transformer& target, const Tokenizer& tokenizer, ModelChatTemplate chat_template,
         std::vector<int64_t> eos_ids, ServerOptions options);
  ~Server();

  // Binds and serves on a background thread; returns the bound port. Throws dspark::Error when
  // the address cannot be bound.
  int start();
  // Stops listening and waits for the handlers that are running.
  void stop();
  int port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  int port_ = 0;
  int listen_socket_ = -1;
};

}  // namespace dspark::serve
