// Trains a DSpark (or DFlash) drafter against a frozen target on regenerated data.
//
// Each step takes B sequences, runs the target once over them (no grad) for the context features
// and, at the aligned positions, its distribution p_t through the frozen head; samples A anchors
// per sequence inside the response; and trains all B*A blocks in one drafter pass with the DSpark
// loss. The last `eval_samples` sequences are held out: a teacher-forced evaluation (tau under
// sampling, acceptance per position) and a live one (greedy speculative decoding of their prompts,
// the real tau) run every `eval_every` steps and at the end.
//
// Data parallel (`dist`, docs/drafter.md): `batch_size` is the global batch; each of W ranks
// trains rows [r*B/W, (r+1)*B/W) of every step's batch (B must be a multiple of W), anchors are
// drawn for the whole batch on every rank, and the gradients are summed weighted by each rank's
// share of the loss normalizer, so W ranks take the step one process takes on the same batch.
// Rank 0 alone writes the checkpoint, the drafter and the log; the checkpoint does not depend on
// W, so a run resumes with any world size.
//
// Output directory: dspark.json + drafter.safetensors (bf16), train/train_state.safetensors,
// train/log.jsonl. `resume` continues bit-exactly.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "drafter/dspark_config.h"
#include "drafter/dspark_loss.h"
#include "model/transformer.h"
#include "train/distributed.h"

namespace dspark {

struct DrafterTrainOptions {
  // Regenerated data (dspark regen), one or more directories read in order (e.g. regenerations at
  // two temperatures); the held-out samples are the last ones of the last directory.
  std::vector<std::string> data_dirs;
  std::string out_dir;
  DSparkConfig config;
  DSparkLossWeights loss;
  int64_t steps = 0;          // schedule length (required unless resuming)
  double minutes = 0;         // with steps: stop this run after M minutes (resume later); without: time budget
  int64_t stop_at = 0;        // stop at this step (checkpoint; resume later)
  int64_t batch_size = 8;     // sequences per step
  int64_t anchors = 32;       // anchors per sequence
  int64_t max_len = 384;      // tokens per sequence (longer ones are cut)
  double lr = 1e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup_steps = -1;  // -1: 4% of the steps
  double weight_decay = 0.0;
  double grad_clip = 1.0;
  uint64_t seed = 0;
  double checkpoint_minutes = 5;
  int64_t eval_every = 0;     // 0: 5 evaluations per run
  int64_t eval_samples = 32;  // held-out sequences
  int64_t live_eval_prompts = 8;
  int64_t live_eval_tokens = 64;
  std::vector<int64_t> eos_ids;
  // Keep the target's hidden states of every training sample in RAM (bf16, computed once before the
  // first step) instead of running the target at every step: about (m + 1) * H * 2 bytes per token.
  bool cache_hidden = false;
  bool resume = false;
  // Start from this drafter's parameters (a directory made for the same target with the same
  // config) instead of fresh ones, with a new schedule: fine-tuning on other data, e.g.
  // regenerations at another temperature.
  std::string init_dir;
  bool progress = true;
  DistOptions dist;  // one process unless world_size > 1
};

struct DrafterEval {
  double tau_probabilistic = 0;              // teacher-forced, 1 + sum_k prod (1 - TV)
  std::vector<double> accept_rate;           // teacher-forced prod_{i<=k} (1 - TV_i) per position
  double live_tau = 0;                       // greedy speculative decoding on held-out prompts
  std::vector<double> live_acceptance;       // per position
};

struct DrafterTrainResult {
  int64_t step = 0, total_steps = 0;
  double train_loss = 0;
  DrafterEval eval;
  double seconds = 0;
  bool finished = false;
};

DrafterTrainResult train_drafter(Transformer& target, const DrafterTrainOptions& options);

class DSparkDrafter;
struct RegenSample;

// How many of n regenerated sequences train_drafter holds out (the last ones): min(eval_samples, n / 5).
int64_t held_out_samples(int64_t n, int64_t eval_samples);
// Occurrences of every target id [vocab] among the tokens a drafter learns to predict: each
// training response's tokens after its first, within max_len. A draft vocabulary is the most
// frequent of them (drafter/draft_vocab.h, most_frequent_tokens).
std::vector<int64_t> label_token_counts(const std::vector<RegenSample>& samples, int64_t vocab, int64_t max_len);

// Teacher-forced and live evaluation on held-out samples (see above).
DrafterEval evaluate_drafter(Transformer& target, DSparkDrafter& drafter, const std::vector<RegenSample>& eval,
                             const DrafterTrainOptions& options);

}  // namespace dspark
