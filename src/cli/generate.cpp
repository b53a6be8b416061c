// dspark generate: complete a prompt with the target model, streaming text to stdout.
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/command.h"
#include "cli/model_args.h"
#include "engine/drafter_factory.h"
#include "engine/engine.h"
#include "engine/verify_setup.h"
#include "spec/speculative.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct GenerateArgs {
  std::string model_dir;
  std::string prompt;
  std::string prompt_file;
  int64_t max_new = 128;
  SamplingParams sampling;
  bool json = false;
  std::string drafter_dir;
  int64_t draft_vocab = 0;  // --draft-vocab: cut the drafter at load (0: as stored)
  std::string draft_kind;
  std::string draft_model_dir;
  int64_t gamma = 0;
  std::string verify;
  std::string calibration;
  double conf_min = 0.5;
  std::string sampled_verify = "block";
  RuntimeArgs runtime;
};

int run_generate(const GenerateArgs& args) {
  validate(args.sampling);
  if (args.max_new < 0) fail("-n must be >= 0 (got {})", args.max_new);
  LoadedModel loaded = load_model_dir(args.model_dir, args.runtime);
  const std::string text = read_prompt(args.prompt, args.prompt_file);
  std::vector<TokenId> ids = loaded.tokenizer->encode(text, /*add_special=*/true);
  if (ids.empty()) {
    if (auto bos = loaded.tokenizer->bos_id()) ids.push_back(*bos);
    else fail("the prompt is empty (give -p TEXT or -f FILE)");
  }
  std::vector<int64_t> prompt(ids.begin(), ids.end());

  StreamingDecoder stream(*loaded.tokenizer);
  auto on_token = [&](int64_t token) {
    if (args.json) return;
    if (std::find(loaded.eos_ids.begin(), loaded.eos_ids.end(), token) != loaded.eos_ids.end()) return;
    std::cout << stream.push(TokenId(token)) << std::flush;
  };
  DrafterFactory factory({args.drafter_dir, args.draft_kind, args.draft_model_dir, args.draft_vocab}, *loaded.model,
                         LoadOptions{args.runtime.dtype, args.runtime.device});
  if (factory.block_size() > 0 && args.gamma > factory.block_size())
    fail("--gamma {} exceeds the drafter's block size {}", args.gamma, factory.block_size());
  const std::string drafter_label = factory.label();
  SpecOptions spec;
  spec.max_new_tokens = args.max_new;
  spec.gamma = args.gamma;
  spec.sampling = args.sampling;
  spec.eos_ids = loaded.eos_ids;
  spec.conf_min = args.conf_min;
  spec.sampled_verify = parse_sampled_verify(args.sampled_verify);
  VerifySetup verify_setup;
  prepare_verify(spec, verify_setup, args.verify, *loaded.model, args.model_dir, factory.dspark(), args.drafter_dir,
                 args.calibration, args.json);
  // The serving engine with one slot, its loop on this thread: the same code path as `dspark serve`.
  EngineOptions eo;
  eo.slots = 1;
  eo.own_thread = false;
  eo.stop_when_idle = true;
  eo.prefill_chunk = eo.prefill_budget = loaded.model->config().max_position_embeddings;  // the prompt at once
  Engine engine(*loaded.model, factory, spec, eo);
  GenerationRequest request;
  request.prompt = prompt;
  request.max_new_tokens = args.max_new;
  request.sampling = args.sampling;
  request.on_token = [&](int64_t token) {
    on_token(token);
    return true;
  };
  std::shared_ptr<RequestState> state = engine.submit(std::move(request));
  engine.run();
  if (state->finish_reason() == FinishReason::Error) fail("{}", state->error());
  const SpecResult& result = state->result();
  const SpecStats& stats = result.stats;
  std::vector<TokenId> shown;
  for (int64_t t : result.tokens)
    if (std::find(loaded.eos_ids.begin(), loaded.eos_ids.end(), t) == loaded.eos_ids.end()) shown.push_back(TokenId(t));
  const double seconds = stats.seconds;
  const double decode_seconds = stats.seconds - stats.prefill_seconds;
  const int64_t n = int64_t(result.tokens.size());
  // Decode speed excludes the first token, whose cost is the prefill.
  const double tps = n > 1 && decode_seconds > 0 ? double(n - 1) / decode_seconds : 0.0;
  if (args.json) {
    nlohmann::json out = {
        {"text", loaded.tokenizer->decode(shown, /*skip_special=*/false)},
        {"tokens", result.tokens},
        {"n_prompt", prompt.size()},
        {"n_generated", n},
        {"hit_eos", result.hit_eos},
        {"seconds", seconds},
        {"prefill_seconds", stats.prefill_seconds},
        {"tokens_per_second", tps},
        {"drafter", drafter_label},
        {"steps", stats.steps},
        {"tau", stats.tau()},
        {"n_drafted", stats.n_drafted},
        {"n_accepted", stats.n_accepted},
        {"acceptance_per_position", stats.acceptance_per_position()},
        {"target_seconds", stats.target_seconds},
        {"draft_seconds", stats.draft_seconds},
    };
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << stream.flush() << "\n";
    std::cerr << fmt::format("[{} prompt tokens, {} generated, {:.2f} s, {:.1f} tokens/s", prompt.size(), n, seconds, tps);
    if (!factory.plain()) std::cerr << fmt::format(", tau {:.2f} over {} verify steps", stats.tau(), stats.steps);
    std::cerr << "]\n";
  }
  return 0;
}

}  // namespace

Command add_generate(CLI::App& root) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* app = root.add_subcommand("generate", "complete a prompt with the target model");
  app->add_option("-m,--model", args->model_dir, "model directory (HF layout)")->required();
  app->add_option("-p,--prompt", args->prompt, "prompt text");
  app->add_option("-f,--file", args->prompt_file, "read the prompt from a file");
  app->add_option("-n,--n-predict", args->max_new, "maximum number of tokens to generate");
  app->add_option("--temp", args->sampling.temperature, "temperature (0 = greedy)");
  app->add_option("--top-k", args->sampling.top_k, "top-k (0 = off)");
  app->add_option("--top-p", args->sampling.top_p, "top-p (1 = off)");
  app->add_option("--seed", args->sampling.seed, "random seed");
  app->add_option("-d,--drafter", args->drafter_dir, "DSpark / DFlash drafter directory (speculative decoding)");
  app->add_option("--draft", args->draft_kind, "model-free drafter: ngram (prompt lookup)");
  app->add_option("--draft-vocab", args->draft_vocab,
                  "cut the -d drafter at load to its N most frequent tokens (token_counts.json beside it; docs/drafter.md)");
  app->add_option("--draft-model", args->draft_model_dir, "small draft LM sharing the target's tokenizer");
  app->add_option("--gamma", args->gamma, "draft tokens per verify step (default: the drafter's block size)");
  app->add_option("--verify", args->verify, "fixed | threshold | sts | auto (default: auto with a confidence head)");
  app->add_option("--calibration", args->calibration, "STS calibration file (default: DRAFTER/calibration.json if present)");
  app->add_option("--conf-min", args->conf_min, "threshold mode: cut drafts at the first confidence below this");
  app->add_option("--sampled-verify", args->sampled_verify,
                  "temperature > 0: block (drafts judged jointly) or token (draft by draft) verification")
      ->capture_default_str();
  app->add_flag("--json", args->json, "print one JSON object instead of streaming text");
  args->runtime.add_to(app);
  return {app, [args] { return run_generate(*args); }};
}

}  // namespace dspark::cli
