// Language-model pre-training from scratch on local text: the engine's own Transformer
// (Qwen3ForCausalLM layout) trained with LibTorch autograd and AdamW (warmup + cosine, global-norm
// clipping) on random windows of a tokenized corpus.
//
// Output directory:
//   config.json, generation_config.json, tokenizer.json, model.safetensors (bf16)   the model
//   train/train.tokens, train/valid.tokens      the corpus, tokenized once
//   train/train_state.safetensors               parameters + AdamW state + position (resume)
//   train/log.jsonl                             loss, lr, tokens/s and validation loss by step
// The model files are rewritten at every checkpoint, so an interrupted run still leaves a usable
// model; `resume` continues bit-exactly from the last checkpoint.
//
// Data parallel (`dist`): `batch_size` is the global batch; rank r of W reads windows
// [r*B/W, (r+1)*B/W) of every step's batch (B a multiple of W) and the gradients are averaged, so
// W ranks take the step one process takes. Rank 0 alone writes; the checkpoint does not depend on
// W (resume with any world size). Every rank tokenizes the corpus (atomic writes of the same file).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/corpus.h"
#include "train/distributed.h"

namespace dspark {

struct LmTrainOptions {
  std::string config_path;     // HF config.json of the model to train
  std::string tokenizer_dir;   // holds tokenizer.json
  std::vector<std::string> corpus;        // training files / directories
  std::vector<std::string> valid_corpus;  // held-out files / directories (optional)
  CorpusOptions corpus_options;
  std::string out_dir;
  std::string init_dir;        // start from this model's weights (a second training stage)

  int64_t steps = 0;        // schedule length; 0: derived from `minutes` and the measured speed
  double minutes = 0;       // wall-clock budget of this run (0: none); a checkpoint is written at the end
  int64_t stop_at = 0;      // stop (checkpoint, resumable) once this step is reached; 0: run to the end
  int64_t seq_len = 256;
  int64_t batch_size = 16;
  double lr = 2e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup_steps = -1;  // -1: 5% of the steps, at most 200
  double weight_decay = 0.1;  // matrices only; norms and biases are not decayed
  double beta1 = 0.9, beta2 = 0.95;
  double grad_clip = 1.0;
  uint64_t seed = 0;
  std::string dtype = "f32";       // training dtype of parameters and activations
  std::string save_dtype = "bf16"; // dtype of the exported model.safetensors
  std::string matmul = "f32";      // "bf16": matrix products in bf16 on AMX (model/bf16_training_linear.h)
  std::string device = "cpu";      // cpu, cuda or cuda:N (model/device.h)
  double checkpoint_minutes = 5;
  int64_t eval_every = 0;      // steps between validation passes; 0: 10 per run
  int64_t eval_windows = 64;   // validation windows of seq_len tokens
  bool resume = false;
  bool progress = true;
  DistOptions dist;  // one process unless world_size > 1
};

struct LmTrainResult {
  int64_t step = 0;           // steps done in total
  int64_t total_steps = 0;
  double train_loss = 0;      // mean over the last steps of this run (nats/token)
  double valid_loss = -1;     // last validation loss (nats/token), -1 without a validation set
  double seconds = 0;         // this run's wall time
  bool finished = false;      // reached total_steps
};

LmTrainResult train_lm(const LmTrainOptions& options);

}  // namespace dspark
