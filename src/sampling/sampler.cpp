#include "sampling/sampler.h"

#include <torch/torch.h>

#include <cmath>

#include "kernels/argmax.h"
#include "kernels/softmax.h"
#include "util/error.h"

namespace dspark {

void validate(const SamplingParams& p) {
  if (std::isnan(p.temperature)) fail("temperature must be a number");
  if (p.top_k < 0) fail("top-k must be >= 0 (got {})", p.top_k);
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) fail("top-p must be in (0, 1] (got {})", p.top_p);
}

bool is_host_f32(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous();
}

at::Tensor processed_probabilities(const at::Tensor& logits_in, const SamplingParams& p) {
  const int64_t V_in = logits_in.size(-1);
  if (!p.greedy() && (p.top_k == 0 || p.top_k >= V_in) && p.top_p >= 1.0 && is_host_f32(logits_in) &&
      kernels::softmax_rows_supported()) {
    // Temperature alone (the common sampled case): one pass per row (kernels/softmax.h).
    at::Tensor probs = at::empty_like(logits_in);
    if (!kernels::softmax_rows_f32(logits_in.data_ptr<float>(), logits_in.numel() / V_in, V_in,
                                   float(1.0 / p.temperature), probs.data_ptr<float>()))
      fail("logits contain NaN or infinity");
    return probs;
  }
  at::Tensor logits = logits_in.to(torch::kFloat32);
  if (!torch::isfinite(logits).all().item<bool>()) fail("logits contain NaN or infinity");
  const int64_t V = logits.size(-1);
  if (p.greedy()) {
    at::Tensor idx = logits.argmax(-1, true);
    return torch::zeros_like(logits).scatter_(-1, idx, 1.0);
  }
  logits = logits / p.temperature;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (p.top_k > 0 && p.top_k < V) {
    at::Tensor kth = std::get<0>(logits.topk(p.top_k, -1)).narrow(-1, p.top_k - 1, 1);
    logits = logits.masked_fill(logits < kth, neg_inf);
  }
  at::Tensor probs = torch::softmax(logits, -1);
  if (p.top_p < 1.0) {
    // Sort descending; drop a token when the mass before it already reaches top_p.
    auto [sorted, order] = probs.sort(-1, /*descending=*/true);
    at::Tensor mass_before = sorted.cumsum(-1) - sorted;
    at::Tensor drop_sorted = mass_before >= p.top_p;
    at::Tensor drop = torch::zeros_like(drop_sorted).scatter_(-1, order, drop_sorted);
    probs = probs.masked_fill(drop, 0.0);
    probs = probs / probs.sum(-1, true);
  }
  return probs;
}

namespace {

template <class T>
int64_t sample_from(const T* p, int64_t V, Rng& rng) {
  double total = 0.0;
  for (int64_t i = 0; i < V; ++i) total += p[i];
  if (!(total > 0.0) || !std::isfinite(total)) fail("cannot sample: probabilities sum to {}", total);
  const double target = rng.uniform() * total;
  double cumulative = 0.0;
  int64_t last_nonzero = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (p[i] <= 0.0) continue;
    cumulative += p[i];
    last_nonzero = i;
    if (target < cumulative) return i;
  }
  return last_nonzero;  // rounding left target == total
}

}  // namespace

int64_t sample_index(const float* probs, int64_t V, Rng& rng) { return sample_from(probs, V, rng); }

int64_t sample_index(const at::Tensor& probs_in, Rng& rng) {
  if (is_host_f32(probs_in))
    return sample_from(probs_in.data_ptr<float>(), probs_in.numel(), rng);  // the same sums, without a float64 copy
  const at::Tensor probs = probs_in.to(torch::kCPU).to(torch::kFloat64).contiguous();
  return sample_from(probs.data_ptr<double>(), probs.numel(), rng);
}

namespace {

// argmax of one row [V] (first maximum); throws for non-finite logits.
int64_t greedy_row(const at::Tensor& logits) {
  if (logits.device().is_cpu() && logits.scalar_type() == torch::kFloat32 && logits.dim() == 1 &&
      logits.is_contiguous()) {
    // One pass over the row (the operator chain below costs tens of microseconds per token).
    const kernels::ArgmaxResult best = kernels::argmax_f32(logits.data_ptr<float>(), logits.numel());
    if (!best.all_finite) fail("logits contain NaN or infinity");
    return best.index;  // first maximum, as argmax
  }
  const std::vector<int64_t> one = greedy_tokens(logits.reshape({1, -1}));
  return one[0];
}

}  // namespace

std::vector<int64_t> greedy_tokens(const at::Tensor& logits) {
  const int64_t n = logits.size(0);
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (logits.device().is_cpu() && logits.scalar_type() == torch::kFloat32) {
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = greedy_row(logits[i].contiguous());
    return out;
  }
  const at::Tensor l = logits.to(torch::kFloat32);                                  // [n, V]
  const at::Tensor best = l.argmax(-1);                                              // [n]
  const at::Tensor finite = torch::isfinite(l).all(-1).to(torch::kInt64);            // [n]
  const at::Tensor host = torch::stack({best, finite}).to(torch::kCPU).contiguous();  // [2, n]: one copy
  const int64_t* p = host.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (!p[n + i]) fail("logits contain NaN or infinity");
    out[size_t(i)] = p[i];
  }
  return out;
}

int64_t sample_token(const at::Tensor& logits, const SamplingParams& params, Rng& rng) {
  if (params.greedy()) return greedy_row(logits);
  return sample_index(processed_probabilities(logits, params), rng);
}

}  // namespace dspark
