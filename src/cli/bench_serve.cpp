// dspark bench-serve: the server under load. For every concurrency level, C clients send
// requests back to back to /v1/completions; every server configuration (plain decoding, the
// drafter with each verify mode) runs in this process on its own loopback port over the same
// loaded target, interleaved level by level so machine noise hits them alike. Reports total
// tokens/s (all completion tokens / wall time), mean per-request tokens/s, tau, and speedup
// over plain decoding at the same concurrency.
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <iostream>
#include <thread>

#include "cli/command.h"
#include "cli/model_args.h"
#include "engine/drafter_factory.h"
#include "engine/engine.h"
#include "engine/verify_setup.h"
#include "io/prompts_file.h"
#include "serve/server.h"
#include "util/error.h"

namespace dspark::cli {
namespace {
using json = nlohmann::json;

struct BenchServeArgs {
  std::string model_dir;
  std::string drafter_dir, draft_kind, draft_model_dir;
  int64_t draft_vocab = 0;  // --draft-vocab: cut the drafter at load (0: as stored)
  std::string prompts_path;
  std::vector<int64_t> concurrency = {1, 2, 4, 8, 16};
  std::vector<std::string> verify = {"fixed", "auto"};
  int64_t requests_per_client = 8;
  int64_t rounds = 4;  // each level in this many interleaved rounds of every configuration
  int64_t max_new = 64;
  double temperature = 0.0;
  int64_t gamma = 0;
  bool json_output = false;
  RuntimeArgs runtime;
};

struct Config {
  std::string name;  // plain | <kind>-<verify>
  SpecOptions base;
  std::shared_ptr<VerifySetup> setup = std::make_shared<VerifySetup>();
};

struct LevelResult {
  double seconds = 0;
  int64_t completion_tokens = 0, requests = 0, failed = 0;
  double per_request_tps_sum = 0;
  double latency_sum = 0, prompt_ms_sum = 0, predicted_ms_sum = 0;  // over successful requests
  int64_t draft_n = 0, draft_accepted = 0, verify_steps = 0;
  // The engine's steps during the level: how many, how many auto chose to decode plainly, their
  // wall time and their target forwards' time.
  int64_t steps = 0, plain_steps = 0;
  double step_seconds = 0, forward_seconds = 0;
  std::map<size_t, std::string> texts;  // prompt index -> text (first seen)
};

// Adds one round's results to a level's.
void accumulate(LevelResult& into, const LevelResult& r) {
  into.seconds += r.seconds;
  into.completion_tokens += r.completion_tokens;
  into.requests += r.requests;
  into.failed += r.failed;
  into.per_request_tps_sum += r.per_request_tps_sum;
  into.latency_sum += r.latency_sum;
  into.prompt_ms_sum += r.prompt_ms_sum;
  into.predicted_ms_sum += r.predicted_ms_sum;
  into.draft_n += r.draft_n;
  into.draft_accepted += r.draft_accepted;
  into.verify_steps += r.verify_steps;
  into.texts.insert(r.texts.begin(), r.texts.end());
  into.steps += r.steps;
  into.plain_steps += r.plain_steps;
  into.step_seconds += r.step_seconds;
  into.forward_seconds += r.forward_seconds;
}

// C clients send `requests_per_client` requests each, back to back; request i (counted over all
// clients) takes prompt (first_prompt + i) mod the prompt count.
LevelResult run_level(int port, const std::vector<std::string>& prompts, int64_t clients, const BenchServeArgs& a,
                      int64_t first_prompt = 0) {
  LevelResult r;
  std::mutex mutex;
  std::atomic<int64_t> next{0};
  const int64_t total = clients * a.requests_per_client;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(600, 0);
      client.set_tcp_nodelay(true);
      client.set_keep_alive(true);
      for (int64_t i = next++; i < total; i = next++) {
        const size_t p = size_t(first_prompt + i) % prompts.size();
        json body = {{"prompt", prompts[p]}, {"max_tokens", a.max_new}, {"temperature", a.temperature}, {"seed", int64_t(i)}};
        const auto t0 = std::chrono::steady_clock::now();
        auto res = client.Post("/v1/completions", body.dump(), "application/json");
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard lock(mutex);
        ++r.requests;
        if (!res || res->status != 200) {
          ++r.failed;
          continue;
        }
        const json out = json::parse(res->body, nullptr, false);
        if (out.is_discarded()) {
          ++r.failed;
          continue;
        }
        const int64_t n = out["usage"]["completion_tokens"].get<int64_t>();
        r.completion_tokens += n;
        r.per_request_tps_sum += s > 0 ? double(n) / s : 0.0;
        const json& t = out["timings"];
        r.latency_sum += s;
        r.prompt_ms_sum += t["prompt_ms"].get<double>();
        r.predicted_ms_sum += t["predicted_ms"].get<double>();
        if (t.contains("draft_n")) {
          r.draft_n += t["draft_n"].get<int64_t>();
          r.draft_accepted += t["draft_n_accepted"].get<int64_t>();
          r.verify_steps += t["num_spec_steps"].get<int64_t>();
        }
        r.texts.emplace(p, out["choices"][0]["text"].get<std::string>());
      }
    });
  }
  for (auto& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

int run_bench_serve(const BenchServeArgs& args) {
  LoadedModel loaded = load_model_dir(args.model_dir, args.runtime);
  Transformer& target = *loaded.model;
  std::vector<std::string> prompts = io::read_prompts_jsonl(args.prompts_path);
  if (prompts.empty()) fail("{}: no prompts", args.prompts_path);
  for (int64_t c : args.concurrency)
    if (c < 1) fail("--concurrency values must be >= 1");
  const int64_t max_clients = *std::max_element(args.concurrency.begin(), args.concurrency.end());
  DrafterFactory none({}, target);
  DrafterFactory drafters({args.drafter_dir, args.draft_kind, args.draft_model_dir, args.draft_vocab}, target,
                          LoadOptions{args.runtime.dtype, args.runtime.device});
  std::vector<Config> configs;
  configs.push_back({"plain"});
  if (!drafters.plain()) {
    for (const auto& mode : args.verify) {
      Config c{drafters.kind() + "-" + mode};
      c.base.gamma = args.gamma;
      prepare_verify(c.base, *c.setup, mode, target, args.model_dir, drafters.dspark(), args.drafter_dir, "",
                     args.json_output, max_clients);
      configs.push_back(std::move(c));
    }
  }
  EngineOptions eo;
  eo.slots = max_clients;
  // One configuration's server at a time, each started fresh and warmed up with one request per
  // client at the level's concurrency (allocations, thread pools, and what auto mode's governor
  // learns of this load: a server that has been running has seen it), then timed. A level runs
  // in `rounds` rounds, every configuration once per round, so that the machine's drift over a
  // level (shared machines: +-10% over tens of seconds) hits all configurations alike.
  if (args.rounds < 1 || args.requests_per_client % args.rounds != 0)
    fail("--requests-per-client ({}) must be a multiple of --rounds ({})", args.requests_per_client, args.rounds);
  BenchServeArgs warm = args, round = args;
  warm.requests_per_client = 1;
  round.requests_per_client = args.requests_per_client / args.rounds;
  // The engine loop runs on this thread (the one that loaded the model, see EngineOptions::
  // own_thread); the clients on others.
  eo.own_thread = false;
  auto run_config = [&](Config& c, int64_t clients, int64_t first_prompt) {
    c.base.eos_ids = loaded.eos_ids;
    Engine engine(target, c.name == "plain" ? none : drafters, c.base, eo);
    serve::ServerOptions so;
    so.port = 0;
    serve::Server server(engine, target, *loaded.tokenizer, serve::load_chat_template(args.model_dir), loaded.eos_ids, so);
    const int port = server.start();
    LevelResult r;
    std::thread load([&] {
      run_level(port, prompts, clients, warm);
      const EngineCounters before = engine.counters();
      r = run_level(port, prompts, clients, round, first_prompt);
      const EngineCounters after = engine.counters();
      r.steps = after.steps - before.steps;
      r.plain_steps = after.plain_steps - before.plain_steps;
      r.step_seconds = after.step_seconds - before.step_seconds;
      r.forward_seconds = after.forward_seconds - before.forward_seconds;
      engine.shutdown(false, std::chrono::milliseconds(0));
    });
    engine.run();
    load.join();

    server.stop();
    return r;
  };

  json results = json::array();
  for (int64_t clients : args.concurrency) {
    std::vector<LevelResult> level(configs.size());
    for (int64_t k = 0; k < args.rounds; ++k)
      for (size_t i = 0; i < configs.size(); ++i)
        accumulate(level[i], run_config(configs[i], clients, k * clients * round.requests_per_client));
    const double plain_tps = level[0].seconds > 0 ? double(level[0].completion_tokens) / level[0].seconds : 0.0;
    for (size_t i = 0; i < configs.size(); ++i) {
      const LevelResult& r = level[i];
      const double tps = r.seconds > 0 ? double(r.completion_tokens) / r.seconds : 0.0;
      const int64_t ok = r.requests - r.failed;
      int64_t mismatches = 0;
      if (args.temperature <= 0)
        for (const auto& [p, text] : r.texts)
          if (level[0].texts.count(p) && level[0].texts.at(p) != text) ++mismatches;
      json row = {{"concurrency", clients},
                  {"config", configs[i].name},
                  {"requests", r.requests},
                  {"failed", r.failed},
                  {"completion_tokens", r.completion_tokens},
                  {"seconds", r.seconds},
                  {"tokens_per_second", tps},
                  {"per_request_tokens_per_second", r.requests > r.failed ? r.per_request_tps_sum / double(r.requests - r.failed) : 0.0},
                  {"speedup", plain_tps > 0 ? tps / plain_tps : 0.0},
                  // Where a request's time goes: in the queue and HTTP, prompt, generation.
                  {"mean_latency_ms", ok > 0 ? 1e3 * r.latency_sum / double(ok) : 0.0},
                  {"mean_prompt_ms", ok > 0 ? r.prompt_ms_sum / double(ok) : 0.0},
                  {"mean_predicted_ms", ok > 0 ? r.predicted_ms_sum / double(ok) : 0.0},
                  {"tau", r.verify_steps > 0 ? double(r.verify_steps + r.draft_accepted) / double(r.verify_steps) : 0.0},
                  {"n_drafted", r.draft_n},
                  {"n_accepted", r.draft_accepted},
                  {"steps", r.steps},
                  {"plain_steps", r.plain_steps},
                  {"mean_step_ms", r.steps > 0 ? 1e3 * r.step_seconds / double(r.steps) : 0.0},
                  {"mean_forward_ms", r.steps > 0 ? 1e3 * r.forward_seconds / double(r.steps) : 0.0}};
      if (args.temperature <= 0) row["outputs_match_plain"] = mismatches == 0;
      results.push_back(row);
    }
    if (!args.json_output) std::cerr << fmt::format("concurrency {} done\n", clients);
  }
  if (args.json_output) {
    std::cout << json{{"model", args.model_dir}, {"drafter", drafters.label()}, {"max_tokens", args.max_new},
                      {"temperature", args.temperature}, {"requests_per_client", args.requests_per_client}, {"rounds", args.rounds},
                      {"results", results}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("{} prompts, max_tokens {}, temperature {}, {} requests per client in {} rounds, drafter {}\n",
                           prompts.size(), args.max_new, args.temperature, args.requests_per_client, args.rounds,
                           drafters.label());
  std::cout << fmt::format("{:>5} {:<14} {:>10} {:>12} {:>8} {:>6} {:>10} {:>10} {:>10}  {}\n", "conc", "config", "tok/s",
                           "req tok/s", "speedup", "tau", "latency", "prompt", "generate", "notes");
  for (const auto& r : results) {
    std::string notes = fmt::format("steps {} (plain {}), {:.2f} ms/step, forward {:.2f} ms ", r["steps"].get<int64_t>(),
                                    r["plain_steps"].get<int64_t>(), r["mean_step_ms"].get<double>(),
                                    r["mean_forward_ms"].get<double>());
    if (r["failed"].get<int64_t>() > 0) notes += fmt::format("{} FAILED ", r["failed"].get<int64_t>());
    if (r.contains("outputs_match_plain") && !r["outputs_match_plain"].get<bool>()) notes += "OUTPUT MISMATCH";
    std::cout << fmt::format("{:>5} {:<14} {:>10.1f} {:>12.1f} {:>7.2f}x {:>6.2f} {:>8.1f}ms {:>8.1f}ms {:>8.1f}ms  {}\n",
                             r["concurrency"].get<int64_t>(), r["config"].get<std::string>(),
                             r["tokens_per_second"].get<double>(), r["per_request_tokens_per_second"].get<double>(),
                             r["speedup"].get<double>(), r["tau"].get<double>(), r["mean_latency_ms"].get<double>(),
                             r["mean_prompt_ms"].get<double>(), r["mean_predicted_ms"].get<double>(), notes);
  }
  return 0;
}

}  // namespace

Command add_bench_serve(CLI::App& root) {
  auto args = std::make_shared<BenchServeArgs>();
  CLI::App* app = root.add_subcommand("bench-serve", "the server under load: plain vs speculative at several concurrencies");
  app->add_option("-m,--model", args->model_dir, "target model directory")->required();
  app->add_option("--prompts", args->prompts_path, "prompts, JSON lines with a \"prompt\" field")->required();
  app->add_option("-d,--drafter", args->drafter_dir, "DSpark / DFlash drafter directory");
  app->add_option("--draft", args->draft_kind, "model-free drafter: ngram");
  app->add_option("--draft-vocab", args->draft_vocab,
                  "cut the -d drafter at load to its N most frequent tokens (token_counts.json beside it; docs/drafter.md)");
  app->add_option("--draft-model", args->draft_model_dir, "small draft LM sharing the target's tokenizer");
  app->add_option("--concurrency", args->concurrency, "client counts (comma list)")->delimiter(',')->capture_default_str();
  app->add_option("--verify", args->verify, "verify modes of the drafter to compare (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--requests-per-client", args->requests_per_client, "requests each client sends")->capture_default_str();
  app->add_option("--rounds", args->rounds, "interleaved rounds per level (divides --requests-per-client)")
      ->capture_default_str();
  app->add_option("-n,--max-tokens", args->max_new, "max_tokens of every request")->capture_default_str();
  app->add_option("--temp", args->temperature, "temperature (0 = greedy; outputs are then compared with plain)");
  app->add_option("--gamma", args->gamma, "draft tokens per verify step (default: the drafter's block size)");
  app->add_flag("--json", args->json_output, "print one JSON object");
  args->runtime.add_to(app);
  return {app, [args] { return run_bench_serve(*args); }};
}

}  // namespace dspark::cli
