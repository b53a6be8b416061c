// Tensor operations shared by the target model and the drafters (LibTorch, autograd-friendly).
#pragma once
#include <ATen/Tensor.h>

#include "model/config.h"

namespace dspark {

// RMSNorm over the last dim, computed in float32. Llama/Qwen: w * normed (cast back first);
// Gemma (`gemma`): normed * (1 + w) in float32, then cast, the order HF uses.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, bool gemma = false);

// Gemma4's RMSNorm: normed * w in float32, then cast (HF's order, so bf16 results match). An
// undefined w: no scale (Gemma4's value norm).
at::Tensor rms_norm_f32_scale(const at::Tensor& x, const at::Tensor& w, double eps);

// y = x w^T + b for x [..., k], w [n, k], b [n]. A few rows on CPU without autograd go to the
// decoding kernels (kernels/matmul); everything else to at::linear.
at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {});

// False when DSPARK_DISABLE_KERNELS=1: every operation then takes the LibTorch path (A/B checks).
bool cpu_fast_paths_enabled();

// Row-invariant numerics for cached inference (Transformer::forward): while one of these is alive
// on a thread, the CPU fast paths (dense, rms_norm, apply_rope, cached attention) take every row
// count, not only decode sizes. Each of them computes a row with the same instructions in the
// same order whatever the other rows are, so a sequence's logits do not depend on the batch it
// shares a forward with or on how its prompt was chunked: a server's greedy output equals the
// single-request output. (LibTorch's GEMMs pick kernels and blockings by shape.)
class RowInvariantScope {
 public:
  RowInvariantScope();
  ~RowInvariantScope();
  RowInvariantScope(const RowInvariantScope&) = delete;
  RowInvariantScope& operator=(const RowInvariantScope&) = delete;

 private:
  bool previous_;
};
bool row_invariant_active();

// Training with bf16 matrix products (model/bf16_training_linear.h: float32 weights and
// activations, bf16 operands, float32 accumulation): while one of these is alive on a thread and
// the CPU has AMX, dense() under autograd with float32 CPU operands takes that path.
class Bf16MatmulScope {
 public:
  explicit Bf16MatmulScope(bool enable = true);
  ~Bf16MatmulScope();
  Bf16MatmulScope(const Bf16MatmulScope&) = delete;
  Bf16MatmulScope& operator=(const Bf16MatmulScope&) = delete;

 private:
  bool previous_;
};

at::Tensor activation(const at::Tensor& x, Activation kind);
at::Tensor softcap(const at::Tensor& x, double cap);  // tanh(x / cap) * cap

}  // namespace dspark
