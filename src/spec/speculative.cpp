#include "spec/speculative.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>

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

// q_j(x) for drafts drawn from row q (nullptr: one-hot at the draft d).
inline double draft_probability(const float* q, int64_t d, int64_t x) { return q ? double(q[x]) : (x == d ? 1.0 : 0.0); }

// The correction token after a rejection: a draw from norm(max(w p - q, 0)) (w = 1: the residual
// of token verification; w < 1: block verification's). Where that has no mass, from p.
int64_t sample_residual(const float* p, const float* q, int64_t d, double w, int64_t V, Rng& rng) {
  std::vector<float> residual(static_cast<size_t>(V));
  double mass = 0.0;
  for (int64_t x = 0; x < V; ++x) {
    residual[size_t(x)] = float(std::max(w * double(p[x]) - draft_probability(q, d, x), 0.0));
    mass += residual[size_t(x)];
  }
  return mass > 1e-12 ? sample_index(residual.data(), V, rng) : sample_index(p, V, rng);
}

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
    v.next_token = sample_residual(p_j, q.empty() ? nullptr : q[size_t(j)], d, 1.0, V, rng);
    return v;
  }
  v.next_token = sample_index(p + n * V, V, rng);  // all accepted: the bonus token from p
  return v;
}

// sum_x max(w p(x) - q(x), 0) over V floats, in 16 interleaved float partial sums (a GCC vector:
// one pass at memory speed instead of a chain of dependent double adds, ~10 us per 8192-wide row
// against a verify cycle of ~4 ms). q null: one-hot at d.
double positive_part_mass(const float* p, const float* q, int64_t d, double w, int64_t V) {
  using Lanes = float __attribute__((vector_size(64)));
  constexpr int64_t kLanes = 16;
  const float wf = float(w);
  if (!q) {  // max(w p(x), 0) everywhere but at d
    double rest = 0.0;
    for (int64_t x = 0; x < V; ++x) rest += double(p[x]);
    return w * (rest - double(p[d])) + std::max(w * double(p[d]) - 1.0, 0.0);
  }
  Lanes acc = {};
  const Lanes zero = {};
  int64_t x = 0;
  for (; x + kLanes <= V; x += kLanes) {
    Lanes a, b;
    std::memcpy(&a, p + x, sizeof a);
    std::memcpy(&b, q + x, sizeof b);
    const Lanes diff = wf * a - b;
    acc += diff > zero ? diff : zero;
  }
  double total = 0.0;
  for (int j = 0; j < kLanes; ++j) total += double(acc[j]);
  for (; x < V; ++x) total += std::max(w * double(p[x]) - double(q[x]), 0.0);
  return total;
}

// Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR
// 2025): the block is judged jointly instead of draft by draft, with the same output
// distribution and at least as many accepted drafts in expectation. A weight w_i carries the
// acceptance ratio along the prefix,
//   w_0 = 1,  w_i = min(1, w_{i-1} p_{i-1}(d_i) / q_{i-1}(d_i)),
// the prefix of i drafts passes its own test with probability
//   h_i = r_i / (r_i + 1 - w_i),  r_i = sum_x max(w_i p_i(x) - q_i(x), 0)   (i < n),  h_n = w_n,
// (one uniform per prefix), the longest passing prefix tau is kept, and the next token is drawn
// from p_n after a full block, else from norm(max(w_tau p_tau - q_tau, 0)). Token-by-token
// verification stops at the first rejected draft; here a later prefix that passes keeps an
// earlier draft whose own ratio fell short. Rows as verify_sampled_rows.
SampledVerdict verify_block_rows(const float* p, int64_t V, const std::vector<int64_t>& drafts,
                                 const std::vector<const float*>& q, Rng& rng) {
  const int64_t n = int64_t(drafts.size());
  auto q_row = [&](int64_t j) { return q.empty() ? nullptr : q[size_t(j)]; };
  std::vector<double> weight(static_cast<size_t>(n + 1), 1.0);
  int64_t tau = 0;
  for (int64_t i = 1; i <= n; ++i) {
    const int64_t j = i - 1, d = drafts[size_t(j)];
    const double q_d = draft_probability(q_row(j), d, d);
    weight[size_t(i)] = q_d > 0 ? std::min(1.0, weight[size_t(j)] * double(p[j * V + d]) / q_d) : 0.0;
    const double w = weight[size_t(i)];
    double h = w;
    if (i < n) {
      const float* p_i = p + i * V;
      const float* q_i = q_row(i);
      const int64_t d_next = drafts[size_t(i)];
      const double r = positive_part_mass(p_i, q_i, d_next, w, V);
      h = r + 1.0 - w > 0 ? r / (r + 1.0 - w) : 1.0;
    }
    if (rng.uniform() <= h) tau = i;
  }
  SampledVerdict v;
  v.accepted = tau;
  if (tau == n) {
    v.next_token = sample_index(p + n * V, V, rng);  // the whole block kept: the bonus token from p
    return v;
  }
  v.next_token = sample_residual(p + tau * V, q_row(tau), drafts[size_t(tau)], weight[size_t(tau)], V, rng);
  return v;
}

}  // namespace

SampledVerify parse_sampled_verify(const std::string& name) {
  if (name == "block") return SampledVerify::Block;
  if (name == "token") return SampledVerify::Token;
  fail("unknown sampled verification '{}' (want block or token)", name);
}

SampledVerdict verify_sampled(const at::Tensor& p_in, const std::vector<int64_t>& drafts, const std::vector<at::Tensor>& q_in,
                              Rng& rng, SampledVerify rule) {
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
  if (rule == SampledVerify::Block) return verify_block_rows(p.data_ptr<float>(), p.size(-1), drafts, q_rows, rng);
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
