#include "model/ops.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"
#include "model/packed_weights.h"
#include "model/bf16_training_linear.h"

namespace dspark {
namespace {
// Rows up to which dense() uses the decoding kernels (bench/matmul_bench.cpp: with more rows,
// LibTorch's blocked GEMM catches up).
constexpr int64_t kKernelMaxRows = 16;
// Rows up to which rms_norm runs as one plain loop (decode: T tokens x heads for q/k norms).
constexpr int64_t kFastNormMaxRows = 1024;

// DSPARK_DISABLE_KERNELS=1 forces at::linear everywhere (for A/B comparisons).
bool kernels_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("DSPARK_DISABLE_KERNELS");
    return !(v && *v && std::string(v) != "0");
  }();
  return enabled;
}

thread_local bool row_invariant = false;
thread_local bool bf16_matmuls = false;

}  // namespace

bool cpu_fast_paths_enabled() { return kernels_enabled(); }

RowInvariantScope::RowInvariantScope() : previous_(row_invariant) { row_invariant = true; }
RowInvariantScope::~RowInvariantScope() { row_invariant = previous_; }
bool row_invariant_active() { return row_invariant && kernels_enabled(); }

Bf16MatmulScope::Bf16MatmulScope(bool enable) : previous_(bf16_matmuls) { bf16_matmuls = enable; }
Bf16MatmulScope::~Bf16MatmulScope() { bf16_matmuls = previous_; }

// RMSNorm over the last dim in float32. Llama/Qwen: w * normed (cast back first), Gemma: normed *
// (1 + w) in float32, then cast (the order HF uses, so bf16 results match).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, bool gemma) {
  // Decoding on the CPU in float32: one pass over raw rows instead of ~7 LibTorch operators
  // (their dispatch overhead, not the arithmetic, dominates at a few rows).
  const bool needs_grad = at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad());
  if (kernels_enabled() && !needs_grad && x.device().is_cpu() && w.device().is_cpu() &&
      x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 && x.dim() >= 1 &&
      w.dim() == 1 && x.size(-1) == w.size(0) && x.numel() > 0 && (row_invariant || x.numel() / x.size(-1) <= kFastNormMaxRows)) {
    const at::Tensor xc = x.contiguous(), wc = w.contiguous();
    at::Tensor y = torch::empty_like(xc);
    const int64_t n = x.size(-1), rows = x.numel() / n;
    const float* px = xc.data_ptr<float>();
    const float* pw = wc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r, px += n, py += n) {
      float sum_sq = 0;
      for (int64_t i = 0; i < n; ++i) sum_sq += px[i] * px[i];
      const float scale = 1.0f / std::sqrt(sum_sq / float(n) + float(eps));
      if (gemma)
        for (int64_t i = 0; i < n; ++i) py[i] = (px[i] * scale) * (1.0f + pw[i]);
      else
        for (int64_t i = 0; i < n; ++i) py[i] = pw[i] * (px[i] * scale);
    }
    return y;
  }
  at::Tensor xf = x.to(torch::kFloat32);
  at::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
  if (gemma) return (normed * (1.0 + w.to(torch::kFloat32))).to(x.scalar_type());
  return w * normed.to(x.scalar_type());
}

at::Tensor rms_norm_f32_scale(const at::Tensor& x, const at::Tensor& w, double eps) {
  // In float32 w * normed is the same product: take rms_norm's fast path.
  if (w.defined() && x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32)
    return rms_norm(x, w, eps, false);
  at::Tensor xf = x.to(torch::kFloat32);
  at::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
  if (w.defined()) normed = normed * w.to(torch::kFloat32);
  return normed.to(x.scalar_type());
}

// y = x w^T + b for x [..., k], w [n, k], b [n]. Few rows (decoding) on CPU with bf16/f32 weights,
// or any number of rows under a RowInvariantScope, go to kernels/matmul (LibTorch 1.13 is far from
// the memory-bandwidth bound there); anything else, and anything autograd must see, goes to
// at::linear. The kernel accumulates in f32 and
// the result is rounded once to x's dtype, as at::linear does.
at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const auto dtype = w.scalar_type();
  const int64_t k = w.dim() == 2 ? w.size(1) : -1;
  const bool needs_grad = at::GradMode::is_enabled() &&
                          (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad()));
  // Mixed: float32 activations against bf16 weights (CPU default for bf16 checkpoints).
  const bool mixed = dtype == torch::kBFloat16 && x.scalar_type() == torch::kFloat32;
  if (kernels_enabled() && !needs_grad && x.device().is_cpu() && w.device().is_cpu() && w.dim() == 2 &&
      w.is_contiguous() && (dtype == torch::kBFloat16 || dtype == torch::kFloat32) &&
      (x.scalar_type() == dtype || mixed) && x.dim() >= 1 && x.size(-1) == k && k > 0 &&
      (row_invariant || x.numel() / k <= kKernelMaxRows) && x.numel() > 0 && (!b.defined() || b.device().is_cpu())) {
    const int64_t rows = x.numel() / k, n = w.size(0);
    at::Tensor xf = x.reshape({rows, k}).to(torch::kFloat32).contiguous();  // [rows, k]
    at::Tensor y = torch::empty({rows, n}, x.options().dtype(torch::kFloat32));  // [rows, n]
    if (const kernels::PackedBf16* packed = dtype == torch::kBFloat16 ? find_packed(w) : nullptr)
      kernels::matmul_bf16_packed(xf.data_ptr<float>(), k, rows, *packed, y.data_ptr<float>(), n);
    else if (dtype == torch::kBFloat16)
      kernels::matmul_bf16(xf.data_ptr<float>(), rows, k, reinterpret_cast<const uint16_t*>(w.data_ptr()), n,
                           y.data_ptr<float>());
    else
      kernels::matmul_f32(xf.data_ptr<float>(), rows, k, w.data_ptr<float>(), n, y.data_ptr<float>());
    if (b.defined()) y.add_(b.to(torch::kFloat32));
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = n;
    return y.to(x.scalar_type()).view(shape);
  }
  if (needs_grad && bf16_matmuls && kernels_enabled() && x.device().is_cpu() && w.device().is_cpu() &&
      x.scalar_type() == torch::kFloat32 && dtype == torch::kFloat32 && w.dim() == 2 && x.dim() >= 1 &&
      x.size(-1) == k && x.numel() > 0 && bf16_training_linear_available() &&
      bf16_training_linear_fits(x.numel() / k, k, w.size(0))) {
    at::Tensor y = bf16_training_linear(x, w);
    return b.defined() ? y + b : y;
  }
  if (mixed)  // many rows (prefill, training): widen the weights for LibTorch's GEMM
    return at::linear(x, w.to(torch::kFloat32), b.defined() ? c10::optional<at::Tensor>(b.to(torch::kFloat32)) : c10::nullopt);
  return at::linear(x, w, b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt);
}

at::Tensor activation(const at::Tensor& x, Activation kind) {
  if (row_invariant_active() && x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && !x.requires_grad()) {
    const at::Tensor in = x.contiguous();
    at::Tensor y = torch::empty_like(in);
    if (kind == Activation::GeluTanh) kernels::gelu_tanh_f32(in.data_ptr<float>(), y.data_ptr<float>(), in.numel());
    else kernels::silu_f32(in.data_ptr<float>(), y.data_ptr<float>(), in.numel());
    return y;
  }
  if (kind == Activation::GeluTanh) return torch::gelu(x, "tanh");
  return torch::silu(x);
}

at::Tensor softcap(const at::Tensor& x, double cap) { return torch::tanh(x / cap) * cap; }

}  // namespace dspark
