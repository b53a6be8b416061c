// The DSpark drafter module (LibTorch). Shapes: B sequences, A anchors per sequence, g block
// slots, N context positions, F target feature width (m*H in `layers` mode, H in `final` mode),
// d backbone width, V target vocabulary, r Markov rank, Vd the drafter's output vocabulary (V, or
// config.draft_vocab_size with a reduced draft vocabulary: drafter/draft_vocab.h).
//
// Block = [anchor, mask x (g-1)] at positions anchor_pos + 0..g-1; slot k predicts the token k+1
// places after the anchor. Slot inputs: the target's frozen embedding of the anchor (projected to
// d) and a learned mask vector. Every layer attends bidirectionally within the block and to the
// context keys/values (target features of the positions strictly before the anchor, fused by
// W_c + RMSNorm). Base logits U come from the target's frozen LM head.
#pragma once
#include <ATen/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "drafter/dspark_config.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"
#include "model/transformer.h"
#include "sampling/sampler.h"
#include "train/train_state.h"

namespace dspark {

class DSparkDrafter {
 public:
  // Fresh parameters: normal(0, init_std) matrices, unit norms, Markov W2 = 0 (so an untrained
  // DSpark drafter is exactly its DFlash backbone), confidence head zero (c = 0.5). The whole
  // vocabulary only (config.draft_vocab_size = 0): a draft vocabulary needs the target itself.
  DSparkDrafter(DSparkConfig config, TargetIdentity target, uint64_t seed);
  // The same for `target` itself, with a reduced draft vocabulary when config.draft_vocab_size =
  // Vd > 0: d2t [Vd] int64 (draft id -> target id, strictly ascending). The target's LM-head rows
  // of those ids are copied once, so a block computes [.., Vd] logits; Markov W2 is [Vd, r].
  // d2t undefined: the whole vocabulary (config.draft_vocab_size must be 0).
  DSparkDrafter(DSparkConfig config, Transformer& target, uint64_t seed, const at::Tensor& d2t);

  // Loads `dir` (dspark.json + drafter.safetensors or shards) and checks it against `target`.
  // Throws dspark::Error with one line for a missing / corrupt directory or another target.
  static std::unique_ptr<DSparkDrafter> load(const std::string& dir, Transformer& target);
  // A drafter for `target` whose parameters come from `source(name, shape)` (a tensor of that
  // shape; the source throws for a missing or malformed one). load() and the readers of other
  // checkpoint layouts (drafter/deepspec_format.h) build drafters this way.
  using ParameterSource = std::function<at::Tensor(const std::string& name, const std::vector<int64_t>& shape)>;
  // `d2t`: the draft vocabulary when config.draft_vocab_size > 0 (see the constructor).
  static std::unique_ptr<DSparkDrafter> from_parameters(DSparkConfig config, Transformer& target,
                                                        const ParameterSource& source, const at::Tensor& d2t = {});
  // This whole-vocabulary drafter restricted to the draft vocabulary d2t [Vd] (drafter/draft_vocab.h):
  // the same parameters with Markov W2 cut to the rows of d2t. The reduced drafter's logits are the
  // full drafter's logits at those ids, so its greedy drafts are the same whenever the full
  // drafter's choice is among them.
  std::unique_ptr<DSparkDrafter> with_draft_vocab(Transformer& target, const at::Tensor& d2t) const;
  // Writes dspark.json + drafter safetensors (f32 or bf16; d2t as I64 when there is one) atomically.
  void save(const std::string& dir, c10::ScalarType dtype = c10::kFloat) const;

  const DSparkConfig& config() const { return config_; }
  const TargetIdentity& target() const { return target_; }
  // The draft vocabulary d2t [Vd] int64; undefined when the drafter predicts the whole vocabulary.
  const at::Tensor& d2t() const { return d2t_; }
  NamedParameters named_parameters() const;
  int64_t parameter_count() const;
  // Hash of config and parameters: identifies this drafter in calibration files.
  std::string fingerprint() const;
  // The fingerprint its calibration files carry: its own, or for a drafter cut by
  // with_draft_vocab() (at load, `--draft-vocab N`), the whole drafter's, whose confidence head it
  // keeps unchanged (its drafts, and so the head's inputs, differ only where the whole drafter
  // chose a token outside the draft vocabulary).
  std::string calibration_fingerprint() const { return cut_from_.empty() ? fingerprint() : cut_from_; }
  void to(c10::Device device);

  // The target hidden states this drafter reads, and the features it builds from them.
  HiddenTaps taps() const;
  // ChunkOutput / forward_full taps -> features [.., F].
  at::Tensor features_from(const at::Tensor& layer_hidden_or_final) const;
  int64_t feature_width() const;

  // ---- Training forward (teacher-forced Markov head) ----
  struct TrainOutput {
    at::Tensor logits;       // [B, A, g, Vd] float32: U_k + B_k (column j: target token d2t[j])
    at::Tensor conf_logits;  // [B, A, g] pre-sigmoid confidence (undefined without the head)
  };
  // features [B, N, F] for every position of each sequence; anchors [B, A] positions (a block at
  // anchor a sees context positions < a only); anchor_tokens [B, A]; prev_tokens [B, A, g] =
  // [anchor, x*_1 .. x*_{g-1}] (the Markov head's teacher-forced inputs).
  TrainOutput forward_train(const Transformer& target, const at::Tensor& features, const at::Tensor& anchors,
                            const at::Tensor& anchor_tokens, const at::Tensor& prev_tokens) const;

  // ---- Inference ----
  // Context keys/values of every layer for the positions seen so far. Roll back with truncate().
  // Keys/values live in per-layer buffers [1, heads, capacity, hd] that grow by doubling; `keys`
  // and `values` are views of their first N positions. Appending a few rows writes them in place
  // (no copy of the whole context per verify cycle; a copied Context shares its buffers), and a
  // CPU draft block writes its own g keys/values just past N, where its attention reads them
  // together with the context.
  struct Context {
    std::vector<at::Tensor> keys, values;               // per layer [1, heads, N, hd] (views)
    std::vector<at::Tensor> key_buffer, value_buffer;   // per layer [1, heads, capacity, hd]
    int64_t length = 0;
    int64_t capacity() const { return key_buffer.empty() ? 0 : key_buffer[0].size(2); }
    void truncate(int64_t n);
  };
  Context new_context() const;
  // Appends features [n, F] of the next n positions.
  void extend_context(Context& context, const at::Tensor& features) const;

  struct Draft {
    std::vector<int64_t> tokens;        // x_1..x_n (target ids)
    std::vector<at::Tensor> q;          // per position: the processed distribution drawn from, [V]
                                        // over target ids (0 outside a draft vocabulary)
    std::vector<double> confidence;     // c_k (empty without the head)
    std::vector<double> conf_logits;    // pre-sigmoid z_k (for calibration)
    at::Tensor logits;                  // [n, Vd] float32: U_k + B_k given the walk's prefix
  };
  // One block after `anchor_token` (at position context.length): backbone once, then the
  // sequential walk over n <= g positions, each token drawn (or argmax) from
  // processed_probabilities(U_k + B_k, params). `forced` (tests) replaces the drawn tokens.
  Draft draft(const Transformer& target, const Context& context, int64_t anchor_token, int64_t n,
              const SamplingParams& params, Rng* rng, const std::vector<int64_t>* forced = nullptr) const;

  // Whether the CPU decoding paths use packed bf16 projections (bf16-rounded inputs, see load()).
  bool uses_packed_projections() const { return !packed_.empty(); }
  // Drops them: decoding then computes in float32 exactly as the training forward does (tests that
  // compare against float32 reference outputs).
  void use_float32_projections() { packed_.clear(); }

 private:
  // Fresh parameters for config_ and target_ (the constructors' common part).
  void init_parameters(uint64_t seed);
  at::Tensor& param(const std::string& name) const;
  // Block hidden states [B, A, g, d] after the output norm. ctx_allowed [B, A, N] bool: context
  // positions each block may see; undefined = all of them.
  at::Tensor backbone(const Transformer& target, const std::vector<at::Tensor>& ctx_keys,
                      const std::vector<at::Tensor>& ctx_values, const at::Tensor& ctx_allowed,
                      const at::Tensor& anchors, const at::Tensor& anchor_tokens) const;
  // Context rows [.., N, F] at positions [N] -> per-layer keys/values [.., heads, N, hd].
  void context_kv(const at::Tensor& features, const at::Tensor& positions, std::vector<at::Tensor>& keys,
                  std::vector<at::Tensor>& values) const;
  at::Tensor base_logits(const Transformer& target, const at::Tensor& hidden) const;  // [.., d] -> [.., Vd]
  // A draft id (a column of the logits) -> its target id.
  int64_t target_id(int64_t draft_id) const { return d2t_.defined() ? d2t_[draft_id].item<int64_t>() : draft_id; }
  // q over the draft vocabulary [Vd] -> over the target's [V], zeros outside.
  at::Tensor target_distribution(const at::Tensor& q) const;
  // The mask slots' input [d]: the learned `mask`, or the target's embedding of mask_token_id.
  at::Tensor mask_input(const Transformer& target) const;
  // One step of the rnn Markov head: the next state; `output` = tanh(o), what W2 projects.
  at::Tensor rnn_step(const at::Tensor& state, const at::Tensor& prev_embedding, const at::Tensor& hidden,
                      at::Tensor& output) const;
  // context_kv() for a few rows on the CPU: features [n, F] float32 contiguous.
  // Writes the keys/values of positions context.length .. + n - 1 into its buffers (room reserved).
  void context_kv_cpu(const at::Tensor& features, Context& context) const;
  // Grows the context's buffers to hold at least `positions` positions (doubling).
  void reserve_context(Context& context, int64_t positions) const;
  // backbone() for one block at inference on the CPU (`layers` context, float32 raw rows): [g, d].
  at::Tensor block_hidden_cpu(const Transformer& target, const Context& context, int64_t anchor_token) const;
  // draft()'s walk for the none/vanilla heads on the CPU: base logits [n, Vd], hidden [n, d].
  Draft walk_cpu(const at::Tensor& base_logits, const at::Tensor& hidden, int64_t anchor_token,
                 const SamplingParams& params, Rng* rng, const std::vector<int64_t>* forced) const;

  DSparkConfig config_;
  TargetIdentity target_;
  std::vector<std::string> names_;                   // canonical order
  mutable std::map<std::string, at::Tensor> params_;
  at::Tensor inv_freq_;
  at::Tensor d2t_;        // [Vd] int64 on the drafter's device; undefined: the whole vocabulary
  at::Tensor head_rows_;  // [Vd, H] the target's LM-head rows of d2t (its dtype and device)
  std::string cut_from_;  // with_draft_vocab(): the whole drafter's fingerprint
  // y[m, n] = x[m, k] W^T for the 2-D parameter `name` [n, k] (float32 rows): through its packed
  // bf16 copy when it has one, else the float32 kernel.
  void matmul_rows(const std::string& name, const float* x, int64_t m, float* y) const;

  at::Tensor walk_w2_bf16_;  // [Vd, r] bf16 copy of markov.w2 when exact (loaded drafters), for the walk
  kernels::Isa walk_isa_ = kernels::Isa::Scalar;  // kernel path for walk_w2_bf16_
  // Packed bf16 copies of the projection matrices of a loaded drafter whose weights are bf16
  // values (kernels/matmul_packed.h), for the CPU decoding paths; empty when training.
  std::map<std::string, kernels::PackedBf16> packed_;
};

namespace io { class TensorStore; }
// Tensor `name` of `store` as float32 (stored F32, BF16 or F16), checked against `shape` and for
// NaN / infinity; one-line dspark::Error naming the file and the tensor otherwise.
at::Tensor read_float_tensor(const io::TensorStore& store, const std::string& name, const std::vector<int64_t>& shape);

}  // namespace dspark
