#include "spec/speculative.h"

#include <torch/torch.h>

#include <algorithm>

#include "spec/decode_step.h"
#include "spec/spec_sequence.h"
#include "util/error.h"

namespace dspark {
VerifyMode parse_verify_mode(const std::string& name) {
  if (name == "fixed") return VerifyMode::Fixed;
  if (name == "threshold") return VerifyMode::Threshold;
  if (name == "sts") return VerifyMode::Sts;
  if (name == "auto") return VerifyMode::Auto;
  fail("unknown verify mode '{}' (want fixed, threshold, sts or auto)", name);
}

std::vector<double> SpecStats::acceptance_per_position() const {
  std::vector<double> out;
  for (size_t k = 0; k < accepted_at.size(); ++k) out.push_back(steps ? double(accepted_at[k]) / double(steps) : 0.0);
  return out;
}

void SpecStats::add(const SpecStats& o) {
  steps += o.steps;
  n_drafted += o.n_drafted;
  n_accepted += o.n_accepted;
  if (accepted_at.size() < o.accepted_at.size()) accepted_at.resize(o.accepted_at.size(), 0);
  if (drafted_at.size() < o.drafted_at.size()) drafted_at.resize(o.drafted_at.size(), 0);
  for (size_t k = 0; k < o.accepted_at.size(); ++k) accepted_at[k] += o.accepted_at[k];
  for (size_t k = 0; k < o.drafted_at.size(); ++k) drafted_at[k] += o.drafted_at[k];
  prefill_seconds += o.prefill_seconds;
  draft_seconds += o.draft_seconds;
  target_seconds += o.target_seconds;
  accept_seconds += o.accept_seconds;
  seconds += o.seconds;
}

namespace {

// The walk of verify_sampled over host float32 rows: p [n + 1, V], q[j] [V] (none: one-hot drafts).
SampledVerdict verify_sampled_rows(const float* p, int64_t V, const std::vector<int64_t>& drafts,
                                   const std::vector<const float*>& q, Rng& rng) {
  SampledVerdict v;
  const int64_t n = int64_t(drafts.size());
  for (int64_t j = 0; j < n; ++j) {
    const float* p_j = p + j * V;
    const int64_t d = drafts[size_t(j)];
    const double p_d = p_j[d];
    const double q_d = q.empty() ? 1.0 : double(q[size_t(j)][d]);
    // Accept with probability min(1, p/q); q_d > 0 since d was drawn from q.
    if (q_d > 0 && rng.uniform() < std::min(1.0, p_d / q_d)) {
      ++v.accepted;
      continue;
    }
    // Rejected: resample from norm(max(p - q, 0)); q one-hot: p without d.
    std::vector<float> residual(static_cast<size_t>(V));
    if (q.empty()) {
      std::copy(p_j, p_j + V, residual.begin());
      residual[size_t(d)] = 0.0f;
    } else {
      const float* q_j = q[size_t(j)];
      for (int64_t i = 0; i < V; ++i) residual[size_t(i)] = std::max(p_j[i] - q_j[i], 0.0f);
    }
    double mass = 0.0;
    for (float r : residual) mass += r;
    v.next_token = mass > 1e-12 ? sample_index(residual.data(), V, rng) : sample_index(p_j, V, rng);
    return v;
  }
  v.next_token = sample_index(p + n * V, V, rng);  // all accepted: the bonus token from p
  return v;
}

}  // namespace

SampledVerdict verify_sampled(const at::Tensor& p_in, const std::vector<int64_t>& drafts, const std::vector<at::Tensor>& q_in,
                              Rng& rng) {
  // The walk reads single probabilities and draws on the host: bring p [n+1, V] over in one copy
  // (a no-op on the CPU) instead of one wait per element on a GPU, and walk raw float rows (one
  // LibTorch operator per element read costs more than the whole walk).
  const at::Tensor p = is_host_f32(p_in) ? p_in : p_in.to(torch::kCPU, torch::kFloat32).contiguous();
  std::vector<at::Tensor> q;
  std::vector<const float*> q_rows;
  for (const at::Tensor& t : q_in) {
    q.push_back(is_host_f32(t) ? t : t.to(torch::kCPU, torch::kFloat32).contiguous());
    q_rows.push_back(q.back().data_ptr<float>());
  }
  return verify_sampled_rows(p.data_ptr<float>(), p.size(-1), drafts, q_rows, rng);
}

SpecResult generate_speculative(Transformer& target, Drafter* drafter, const std::vector<int64_t>& prompt,
                                const SpecOptions& o, const std::function<void(int64_t)>& on_token) {
  // One sequence through the same step the server batches (spec/decode_step.h): the prompt in
  // one chunk, then draft / verify until done.
  SpecSequence sequence(target, drafter, prompt, o, on_token);
  SpeculationGovernor fresh;
  StepOptions step;
  step.governor = o.governor ? o.governor : &fresh;
  while (!sequence.done()) decode_step(target, {&sequence}, step);
  return sequence.take_result();
}

}  // namespace dspark
