// dspark serve: the OpenAI-compatible server (src/serve) over the continuous-batching engine.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <iostream>
#include <thread>

#include "cli/command.h"
#include "cli/model_args.h"
#include "engine/drafter_factory.h"
#include "engine/engine.h"
#include "engine/verify_setup.h"
#include "serve/server.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

// SIGINT / SIGTERM -> one byte on this pipe, read by the stopper thread. A handler (not sigwait
// with the signals blocked) because a process-directed signal goes to any thread that does not
// block it, and libraries start threads of their own before main (OpenBLAS's pool): with the
// default action there, the first signal killed the server mid-request.
int g_signal_pipe[2] = {-1, -1};

void on_stop_signal(int signal_number) {
  const int saved = errno;
  const char byte = char(signal_number);
  [[maybe_unused]] const ssize_t written = write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

// Blocks until a stop signal arrives; returns false if the pipe failed.
bool wait_for_stop_signal() {
  char byte = 0;
  for (;;) {
    const ssize_t n = read(g_signal_pipe[0], &byte, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

struct ServeArgs {
  std::string model_dir;
  std::string drafter_dir, draft_kind, draft_model_dir;
  int64_t draft_vocab = 0;  // --draft-vocab: cut the drafter at load (0: as stored)
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string alias;
  EngineOptions engine;
  int64_t gamma = 0;
  std::string verify, calibration;
  double conf_min = 0.5;
  std::string sampled_verify = "block";
  int http_threads = 0;
  RuntimeArgs runtime;
};

int run_serve(const ServeArgs& args) {
  // SIGINT / SIGTERM stop the server gracefully (on_stop_signal); a client that disconnects must
  // not kill the process (SIGPIPE).
  if (pipe(g_signal_pipe) != 0) fail("cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  LoadedModel loaded = load_model_dir(args.model_dir, args.runtime);
  Transformer& target = *loaded.model;
  DrafterFactory drafters({args.drafter_dir, args.draft_kind, args.draft_model_dir, args.draft_vocab}, target,
                          LoadOptions{args.runtime.dtype, args.runtime.device});
  if (drafters.block_size() > 0 && args.gamma > drafters.block_size())
    fail("--gamma {} exceeds the drafter's block size {}", args.gamma, drafters.block_size());
  SpecOptions base;
  base.gamma = args.gamma;
  base.eos_ids = loaded.eos_ids;
  base.conf_min = args.conf_min;
  base.sampled_verify = parse_sampled_verify(args.sampled_verify);
  VerifySetup verify_setup;
  prepare_verify(base, verify_setup, args.verify, target, args.model_dir, drafters.dspark(), args.drafter_dir,
                 args.calibration, /*quiet=*/false, args.engine.slots);
  serve::ModelChatTemplate chat = serve::load_chat_template(args.model_dir);

  // The engine's loop runs on this thread, the one that loaded the model (EngineOptions::own_thread).
  EngineOptions eo = args.engine;
  eo.own_thread = false;
  Engine engine(target, drafters, base, eo);
  serve::ServerOptions so;
  so.host = args.host;
  so.port = args.port;
  so.model_id = args.alias.empty() ? args.model_dir : args.alias;
  so.http_threads = args.http_threads;
  serve::Server server(engine, target, *loaded.tokenizer, std::move(chat), loaded.eos_ids, so);
  const int port = server.start();
  const char* verify_names[] = {"fixed", "threshold", "sts", "auto"};
  std::cerr << fmt::format("dspark serve: listening on http://{}:{} (model {}, drafter {}, verify {}, {} slots, ctx {})\n",
                           args.host, port, so.model_id, drafters.label(),
                           drafters.plain() ? "none" : verify_names[int(base.verify)], args.engine.slots, engine.context())
            << std::flush;

  std::thread stopper([&] {
    if (!wait_for_stop_signal()) return;
    std::cerr << "dspark serve: stopping (finishing running requests; again to cancel them)\n";
    // Running requests get a grace period; a second signal cancels them at once.
    std::thread([&] {
      if (wait_for_stop_signal()) engine.shutdown(/*drain=*/false, std::chrono::milliseconds(0));
    }).detach();
    engine.shutdown(/*drain=*/true, std::chrono::seconds(30));
  });
  engine.run();  // until the stopper has shut the engine down
  stopper.join();
  server.stop();
  std::cerr << "dspark serve: stopped\n";
  return 0;
}

}  // namespace

Command add_serve(CLI::App& root) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* app = root.add_subcommand("serve", "OpenAI-compatible HTTP server with speculative decoding");
  app->add_option("-m,--model", args->model_dir, "target model directory")->required();
  app->add_option("-d,--drafter", args->drafter_dir, "DSpark / DFlash drafter directory");
  app->add_option("--draft", args->draft_kind, "model-free drafter: ngram");
  app->add_option("--draft-vocab", args->draft_vocab,
                  "cut the -d drafter at load to its N most frequent tokens (token_counts.json beside it; docs/drafter.md)");
  app->add_option("--draft-model", args->draft_model_dir, "small draft LM sharing the target's tokenizer");
  app->add_option("--host", args->host, "address to bind (default 127.0.0.1: this machine only)")->capture_default_str();
  app->add_option("--port", args->port, "port (0: any free port)")->capture_default_str();
  app->add_option("--alias", args->alias, "model name in responses (default: the model directory)");
  app->add_option("--parallel,--np", args->engine.slots, "requests decoded together (slots); more wait in a queue")
      ->capture_default_str();
  app->add_option("-c,--ctx", args->engine.context, "context per request, prompt + generated (0: the model's)")
      ->capture_default_str();
  app->add_option("--prefill-chunk", args->engine.prefill_chunk, "prompt tokens per request per step")->capture_default_str();
  app->add_option("--prefill-budget", args->engine.prefill_budget, "prompt tokens per step over all requests")
      ->capture_default_str();
  app->add_option("--max-queue", args->engine.max_queue, "requests waiting for a slot before 503")->capture_default_str();
  app->add_option("--gamma", args->gamma, "draft tokens per verify step (default: the drafter's block size)");
  app->add_option("--verify", args->verify, "fixed | threshold | sts | auto (default: auto with a confidence head)");
  app->add_option("--calibration", args->calibration, "STS calibration file (default: DRAFTER/calibration.json)");
  app->add_option("--conf-min", args->conf_min, "threshold / sts modes: cut drafts below this");
  app->add_option("--sampled-verify", args->sampled_verify,
                  "temperature > 0: block (drafts judged jointly) or token (draft by draft) verification")
      ->capture_default_str();
  app->add_option("--http-threads", args->http_threads, "HTTP worker threads (default: max(32, 4 x parallel))");
  args->runtime.add_to(app);
  return {app, [args] { return run_serve(*args); }};
}

}  // namespace dspark::cli
