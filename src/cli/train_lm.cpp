// dspark train-lm: pre-trains a Qwen3-architecture LM from scratch on local text.
#include <iostream>

#include "cli/command.h"
#include "cli/distributed_args.h"
#include "model/device.h"
#include "train/lm_trainer.h"

namespace dspark::cli {
namespace {

struct TrainLmArgs {
  LmTrainOptions train;
  RuntimeArgs runtime;
  DistributedArgs dist;
};

int run_train_lm(TrainLmArgs args) {
  if (args.dist.launching()) return launch_local_ranks(args.dist.nproc, kLaunchGraceSeconds);
  args.train.device = args.runtime.device;
  args.runtime.apply();
  args.train.dist = args.dist.options(parse_device(args.train.device).is_cuda());
  const LmTrainResult r = train_lm(args.train);
  if (args.dist.rank != 0) return 0;
  std::cout << fmt::format("step {}/{}  train loss {:.4f}", r.step, r.total_steps, r.train_loss);
  if (r.valid_loss >= 0) std::cout << fmt::format("  valid loss {:.4f}", r.valid_loss);
  std::cout << fmt::format("  {:.0f} s\n", r.seconds);
  return 0;
}

}  // namespace

Command add_train_lm(CLI::App& root) {
  auto args = std::make_shared<TrainLmArgs>();
  LmTrainOptions& o = args->train;
  CLI::App* app = root.add_subcommand("train-lm", "train a language model from scratch (Qwen3 layout)");
  app->add_option("--config", o.config_path, "HF config.json of the model")->required();
  app->add_option("--tokenizer", o.tokenizer_dir, "directory with tokenizer.json")->required();
  app->add_option("--corpus", o.corpus, "training files or directories")->required();
  app->add_option("--valid", o.valid_corpus, "held-out files or directories for validation loss");
  app->add_option("--ext", o.corpus_options.extensions, "only files with these extensions in directories");
  app->add_option("--exclude", o.corpus_options.exclude, "skip directories or files with these names");
  app->add_option("--out", o.out_dir, "output directory (model + train/ state)")->required();
  app->add_option("--init", o.init_dir, "initialise from this model directory's weights (e.g. a second stage)");
  app->add_option("--steps", o.steps, "optimizer steps (schedule length)");
  app->add_option("--minutes", o.minutes, "stop this run after M minutes (schedule from the measured speed if no --steps)");
  app->add_option("--stop-at", o.stop_at, "checkpoint and stop at this step (continue later with --resume)");
  app->add_option("--seq-len", o.seq_len, "tokens per training window")->capture_default_str();
  app->add_option("--batch-size", o.batch_size, "windows per step")->capture_default_str();
  app->add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  app->add_option("--min-lr-ratio", o.min_lr_ratio, "final lr / peak lr")->capture_default_str();
  app->add_option("--warmup", o.warmup_steps, "warmup steps (-1: 5% up to 200)")->capture_default_str();
  app->add_option("--weight-decay", o.weight_decay, "AdamW weight decay on matrices")->capture_default_str();
  app->add_option("--clip", o.grad_clip, "global gradient-norm clip")->capture_default_str();
  app->add_option("--seed", o.seed, "seed of initialisation and data order")->capture_default_str();
  app->add_option("--train-dtype", o.dtype, "f32 or bf16 parameters and activations")->capture_default_str();
  app->add_option("--save-dtype", o.save_dtype, "dtype of the exported model.safetensors")->capture_default_str();
  app->add_option("--matmul", o.matmul,
                  "f32, or bf16: matrix products in bf16 with float32 accumulation and float32 weights (CPUs with AMX)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app->add_option("--checkpoint-minutes", o.checkpoint_minutes, "minutes between checkpoints")->capture_default_str();
  app->add_option("--eval-every", o.eval_every, "steps between validation passes (0: 10 per run)");
  app->add_option("--eval-windows", o.eval_windows, "validation windows per pass")->capture_default_str();
  app->add_flag("--resume", o.resume, "continue the run in --out from its last checkpoint");
  app->add_option("-t,--threads", args->runtime.threads, "CPU threads (default: all cores)");
  app->add_option("--device", args->runtime.device, "cpu or cuda[:N]")->capture_default_str();
  args->dist.add_to(app);
  return {app, [args] { return run_train_lm(*args); }};
}

}  // namespace dspark::cli
