// dspark train: trains a DSpark (or DFlash) drafter for a frozen target on regenerated data.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/distributed_args.h"
#include "cli/model_args.h"
#include "drafter/dspark_drafter.h"
#include "model/device.h"
#include "io/atomic_file.h"
#include "train/drafter_trainer.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct TrainDrafterArgs {
  std::string target_dir;
  std::string config_path;
  DrafterTrainOptions train;
  bool dflash = false;
  std::vector<double> loss_weights;  // ce, l1, bce
  double loss_decay = 0;
  std::string ce_label = "data";
  int64_t block_size = 0;
  std::string markov;
  std::string context;
  std::string layout = "native";
  int64_t mask_token_id = -1;
  int64_t draft_vocab = 0;
  RuntimeArgs runtime;
  DistributedArgs dist;
};

int run_train_drafter(TrainDrafterArgs args) {
  if (args.dist.launching()) return launch_local_ranks(args.dist.nproc, kLaunchGraceSeconds);
  LoadedModel loaded = load_model_dir(args.target_dir, args.runtime);
  DrafterTrainOptions& o = args.train;
  o.dist = args.dist.options(parse_device(args.runtime.device).is_cuda());
  o.eos_ids = loaded.eos_ids;
  if (!o.init_dir.empty()) {
    // The starting drafter fixes the architecture; options that would change it are refused.
    if (!args.config_path.empty() || args.block_size > 0 || !args.markov.empty() || !args.context.empty() ||
        args.layout != "native" || args.mask_token_id >= 0 || args.draft_vocab != 0)
      fail("--init takes the drafter's architecture from {}: leave out --config, --block-size, --markov, --context, "
           "--layout, --mask-token-id and --draft-vocab",
           o.init_dir);
    o.config = DSparkDrafter::load(o.init_dir, *loaded.model)->config();  // checks it against the target
  }
  if (!args.config_path.empty())
    o.config = dspark_config_from_json(nlohmann::json::parse(io::read_text_file(args.config_path), nullptr, false),
                                       args.config_path);
  if (args.block_size > 0) o.config.block_size = args.block_size;
  if (!args.markov.empty()) o.config.markov = parse_markov_kind(args.markov);
  if (!args.context.empty()) o.config.context = parse_context_mode(args.context);
  if (args.draft_vocab < 0) fail("--draft-vocab must be > 0 (the number of draft tokens)");
  if (args.draft_vocab > 0) o.config.draft_vocab_size = args.draft_vocab;
  if (args.layout == "deepspec") {
    // DeepSpec's drafter: the target's width and head geometry, no input / output projections,
    // mask slots = the target's embedding of a mask token; exports with `dspark convert --to deepspec`.
    const ModelConfig& tc = loaded.model->config();
    if (args.mask_token_id < 0 || args.mask_token_id >= tc.vocab_size)
      fail("--layout deepspec needs --mask-token-id, a token of the target's vocabulary of {}", tc.vocab_size);
    apply_deepspec_layout(o.config, tc, args.mask_token_id);
  } else if (args.layout != "native") {
    fail("--layout must be native or deepspec, not '{}'", args.layout);
  } else if (args.mask_token_id >= 0) {
    o.config.mask_token_id = args.mask_token_id;
  }
  if (args.dflash) {
    // The DFlash baseline: the same backbone, no Markov head, no confidence head, CE only.
    o.config.markov = MarkovKind::None;
    o.config.confidence = false;
    o.loss = DSparkLossWeights::dflash();
  }
  if (!args.loss_weights.empty()) {
    if (args.loss_weights.size() != 3 || args.loss_weights[0] < 0 || args.loss_weights[1] < 0 || args.loss_weights[2] < 0)
      fail("--loss-weights takes three non-negative numbers: CE,L1,BCE");
    o.loss.ce = args.loss_weights[0];
    o.loss.l1 = args.loss_weights[1];
    o.loss.bce = args.loss_weights[2];
  }
  if (args.ce_label != "data" && args.ce_label != "target-argmax") fail("--ce-label must be data or target-argmax");
  o.loss.ce_on_target_argmax = args.ce_label == "target-argmax";
  if (args.loss_decay < 0) fail("--loss-decay must be > 0 (0: the default, 4)");
  if (args.loss_decay > 0) o.loss.decay = args.loss_decay;
  if (o.config.target_layers.empty() && o.config.context == ContextMode::Layers)
    o.config.target_layers = DSparkConfig::dflash_layers(loaded.model->config().num_layers);
  const DrafterTrainResult r = train_drafter(*loaded.model, o);
  if (o.dist.rank == 0)
    std::cout << fmt::format("step {}/{}  loss {:.4f}  held-out tau_probabilistic {:.3f}  live greedy tau {:.3f}\n", r.step,
                           r.total_steps, r.train_loss, r.eval.tau_probabilistic, r.eval.live_tau);
  return 0;
}

}  // namespace

Command add_train_drafter(CLI::App& root) {
  auto args = std::make_shared<TrainDrafterArgs>();
  DrafterTrainOptions& o = args->train;
  CLI::App* app = root.add_subcommand("train", "train a DSpark / DFlash drafter for a target");
  app->add_option("--target", args->target_dir, "target model directory")->required();
  app->add_option("--data", o.data_dirs, "regenerated data directory (dspark regen); repeat to train on several")->required();
  app->add_option("--out", o.out_dir, "drafter output directory")->required();
  app->add_option("--config", args->config_path, "drafter config JSON (see docs/drafter.md)");
  app->add_flag("--dflash", args->dflash, "train the DFlash baseline (no Markov / confidence head, CE only)");
  app->add_option("--loss-weights", args->loss_weights,
                  "CE,L1,BCE weights of the loss (default 0.1,0.9,1.0; --dflash: 1,0,0)")
      ->delimiter(',')
      ->expected(3);
  app->add_option("--ce-label", args->ce_label,
                  "CE label: data (the regenerated token) or target-argmax (the target's greedy token there)")
      ->capture_default_str();
  app->add_option("--loss-decay", args->loss_decay, "position-weight decay d of exp(-(k-1)/d) (default 4)");
  app->add_option("--block-size", args->block_size, "g, draft tokens per block");
  app->add_option("--markov", args->markov, "none | vanilla | gated | rnn");
  app->add_option("--context", args->context, "layers | final");
  app->add_option("--layout", args->layout,
                  "native (own width, learned mask) or deepspec (the target's width and heads, mask token; exports "
                  "with dspark convert --to deepspec)")
      ->capture_default_str();
  app->add_option("--mask-token-id", args->mask_token_id,
                  "mask slots hold the target's embedding of this token (required by --layout deepspec)");
  app->add_option("--draft-vocab", args->draft_vocab,
                  "predict only the N most frequent target tokens of the training data (a d2t map; docs/drafter.md)");
  app->add_option("--steps", o.steps, "optimizer steps");
  app->add_option("--minutes", o.minutes, "with --steps: stop this run after M minutes (resume later); without: train for a time budget of M minutes");
  app->add_option("--stop-at", o.stop_at, "stop at this step (resume later)");
  app->add_option("--batch-size", o.batch_size, "sequences per step")->capture_default_str();
  app->add_option("--anchors", o.anchors, "anchors per sequence")->capture_default_str();
  app->add_option("--max-len", o.max_len, "tokens per sequence")->capture_default_str();
  app->add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  app->add_option("--warmup", o.warmup_steps, "warmup steps (-1: 4%)")->capture_default_str();
  app->add_option("--seed", o.seed, "seed")->capture_default_str();
  app->add_option("--eval-every", o.eval_every, "steps between evaluations (0: 5 per run)");
  app->add_option("--eval-samples", o.eval_samples, "held-out sequences")->capture_default_str();
  app->add_option("--live-prompts", o.live_eval_prompts, "held-out prompts decoded live")->capture_default_str();
  app->add_option("--checkpoint-minutes", o.checkpoint_minutes, "minutes between checkpoints")->capture_default_str();
  app->add_flag("--cache-hidden", o.cache_hidden,
               "keep the target's hidden states of the training samples in RAM (bf16, computed once) instead of "
               "running the target at every step");
  app->add_flag("--resume", o.resume, "continue the run in --out");
  app->add_option("--init", o.init_dir,
                  "start from this drafter's parameters and architecture (fine-tuning; a new schedule)");
  args->runtime.add_to(app);
  args->dist.add_to(app);
  return {app, [args] { return run_train_drafter(*args); }};
}

}  // namespace dspark::cli
