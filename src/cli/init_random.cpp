// dspark init-random: a random-weight checkpoint in HF layout for any supported config.json.
// Used by tests and speed benchmarks (e.g. with Qwen3-0.6B's public config). With --drafter-for,
// a random DSpark drafter for an existing target instead (speed checks of the draft block: its
// acceptance is meaningless, its cost is real).
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "drafter/dspark_drafter.h"
#include "io/atomic_file.h"
#include "model/config.h"
#include "model/model_dir.h"
#include "model/weights.h"
#include "tokenizer/tokenizer_json_writer.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct InitRandomArgs {
  std::string config_path;
  std::string out_dir;
  std::string dtype = "bf16";
  uint64_t seed = 0;
  std::string tokenizer_dir;
  int64_t shard_mb = 0;
  std::string drafter_for;     // target directory: write a drafter instead of a model
  std::string drafter_config;  // DSpark config JSON (configs/*.drafter.json); default: the built-in one
  std::string layout = "native";
  int64_t mask_token_id = -1;  // deepspec layout; -1: the target's last token id
  int64_t draft_vocab = 0;     // a reduced draft vocabulary of the first N target ids
};

int run_init_random_drafter(const InitRandomArgs& args) {
  auto target = Transformer::load(args.drafter_for);
  const ModelConfig& tc = target->config();
  DSparkConfig config;
  if (!args.drafter_config.empty())
    config = dspark_config_from_json(nlohmann::json::parse(io::read_text_file(args.drafter_config), nullptr, false),
                                     args.drafter_config);
  if (args.layout == "deepspec")
    apply_deepspec_layout(config, tc, args.mask_token_id >= 0 ? args.mask_token_id : tc.vocab_size - 1);
  else if (args.layout != "native")
    fail("--layout must be native or deepspec, not '{}'", args.layout);
  if (config.context == ContextMode::Layers && config.target_layers.empty())
    config.target_layers = DSparkConfig::dflash_layers(tc.num_layers);
  at::Tensor d2t;
  if (config.draft_vocab_size > 0 && args.draft_vocab == 0)
    fail("{} sets draft_vocab_size: give the size with --draft-vocab N", args.drafter_config);
  if (args.draft_vocab > 0) {
    // Which ids does not change the cost of a block; a trained drafter takes the most frequent ones.
    if (args.draft_vocab >= tc.vocab_size)
      fail("--draft-vocab {} must be below the target's vocabulary of {}", args.draft_vocab, tc.vocab_size);
    config.draft_vocab_size = args.draft_vocab;
    d2t = torch::arange(args.draft_vocab, torch::kInt64);
  }
  const c10::ScalarType dtype = parse_dtype(args.dtype);
  if (dtype != c10::kFloat && dtype != c10::kBFloat16) fail("a drafter is stored as f32 or bf16, not {}", args.dtype);
  DSparkDrafter drafter(config, *target, args.seed, d2t);
  drafter.save(args.out_dir, dtype);
  std::cerr << fmt::format("wrote a random {} drafter ({} layout, {} layers, width {}, block {}, {:.1f} M parameters, {}{}) for {} to {}\n",
                           markov_kind_name(config.markov), args.layout, config.num_layers, config.width,
                           config.block_size, drafter.parameter_count() / 1e6, dtype_to_hf(dtype),
                           d2t.defined() ? fmt::format(", draft vocabulary {} of {}", args.draft_vocab, tc.vocab_size) : "",
                           args.drafter_for, args.out_dir);
  return 0;
}

int run_init_random(const InitRandomArgs& args) {
  namespace fs = std::filesystem;
  if (!args.drafter_for.empty()) {
    if (!args.config_path.empty()) fail("with --drafter-for the drafter's config is --drafter-config, not --config");
    if (args.draft_vocab < 0) fail("--draft-vocab must be positive, not {}", args.draft_vocab);
    return run_init_random_drafter(args);
  }
  if (args.draft_vocab != 0 || !args.drafter_config.empty() || args.layout != "native" || args.mask_token_id >= 0)
    fail("--draft-vocab, --drafter-config, --layout and --mask-token-id need --drafter-for");
  if (args.config_path.empty()) fail("init-random needs --config CONFIG.json (or --drafter-for TARGET_DIR)");
  using json = nlohmann::json;
  const std::string text = io::read_text_file(args.config_path);
  ModelConfig config = parse_model_config(text, args.config_path);
  const c10::ScalarType dtype = parse_dtype(args.dtype);
  fs::create_directories(args.out_dir);

  json config_json = json::parse(text);

  // A tokenizer: copied from --tokenizer, or the 256 single bytes + <|endoftext|> (the rest of
  // the vocabulary is never produced by encoding, but the model can still emit those ids).
  if (!args.tokenizer_dir.empty()) {
    bool copied = false;
    for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json"}) {
      fs::path src = fs::path(args.tokenizer_dir) / name;
      if (fs::exists(src)) {
        io::write_text_atomic((fs::path(args.out_dir) / name).string(), io::read_text_file(src.string()));
        copied = true;
      }
    }
    if (!copied) fail("no tokenizer.json or tokenizer.model in '{}'", args.tokenizer_dir);
  } else {
    if (config.vocab_size < 257) fail("{}: a byte-level tokenizer needs vocab_size >= 257", args.config_path);
    ByteLevelBpe bpe;
    for (int b = 0; b < 256; ++b) bpe.tokens.push_back(std::string(1, char(b)));
    bpe.special_tokens.push_back("<|endoftext|>");
    write_tokenizer_json((fs::path(args.out_dir) / "tokenizer.json").string(), bpe);
    config_json["eos_token_id"] = 256;
    config_json.erase("bos_token_id");
  }
  ModelWeights weights = random_weights(config, dtype, args.seed);
  write_model_dir(args.out_dir, config_json, weights, dtype, size_t(args.shard_mb) << 20);
  std::cerr << fmt::format("wrote {} ({}, {:.1f} M parameters, {}) to {}\n", config.architecture_name,
                           args.config_path, config.parameter_count() / 1e6, dtype_to_hf(dtype), args.out_dir);
  return 0;
}

}  // namespace

Command add_init_random(CLI::App& root) {
  auto args = std::make_shared<InitRandomArgs>();
  CLI::App* app = root.add_subcommand("init-random", "write a random-weight checkpoint for a config.json");
  app->add_option("--config", args->config_path, "HF config.json");
  app->add_option("--out", args->out_dir, "output directory")->required();
  app->add_option("--dtype", args->dtype, "f32, bf16 or f16");
  app->add_option("--seed", args->seed, "random seed");
  app->add_option("--tokenizer", args->tokenizer_dir, "copy the tokenizer from this directory");
  app->add_option("--shard-mb", args->shard_mb, "shard the weights into files of at most this many MB");
  app->add_option("--drafter-for", args->drafter_for, "write a random DSpark drafter for this target model directory");
  app->add_option("--drafter-config", args->drafter_config, "with --drafter-for: drafter config JSON (configs/*.drafter.json)");
  app->add_option("--layout", args->layout, "with --drafter-for: native or deepspec (the target's width and heads)")
      ->capture_default_str();
  app->add_option("--mask-token-id", args->mask_token_id, "with --layout deepspec: the mask token (default: the last id)");
  app->add_option("--draft-vocab", args->draft_vocab,
                  "with --drafter-for: a reduced draft vocabulary of the first N target ids (docs/drafter.md)");
  return {app, [args] { return run_init_random(*args); }};
}

}  // namespace dspark::cli
