#include "spec/speculative.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace dspark {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

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

SampledVerdict verify_sampled(const at::Tensor& p, const std::vector<int64_t>& drafts, const std::vector<at::Tensor>& q,
                              Rng& rng) {
  SampledVerdict v;
  const int64_t n = int64_t(drafts.size());
  for (int64_t j = 0; j < n; ++j) {
    at::Tensor p_j = p[j];
    const int64_t d = drafts[size_t(j)];
    const double p_d = p_j[d].item<double>();
    const double q_d = q.empty() ? 1.0 : q[size_t(j)][d].item<double>();
    // Accept with probability min(1, p/q); q_d > 0 since d was drawn from q.
    if (q_d > 0 && rng.uniform() < std::min(1.0, p_d / q_d)) {
      ++v.accepted;
      continue;
    }
    // Rejected: resample from norm(max(p - q, 0)); q one-hot: p without d.
    at::Tensor residual;
    if (q.empty()) {
      residual = p_j.clone();
      residual[d] = 0.0;
    } else {
      residual = (p_j - q[size_t(j)]).clamp_min(0.0);
    }
    const double mass = residual.sum().item<double>();
    v.next_token = mass > 1e-12 ? sample_index(residual, rng) : sample_index(p_j, rng);
    return v;
  }
  v.next_token = sample_index(p[n], rng);  // all accepted: the bonus token from p
  return v;
}

SpecResult generate_speculative(Transformer& target, Drafter* drafter, const std::vector<int64_t>& prompt,
                                const SpecOptions& o, const std::function<void(int64_t)>& on_token) {
  validate(o.sampling);
  if (prompt.empty()) fail("empty prompt");
  const auto start = Clock::now();
  SpecResult result;
  SpecStats& stats = result.stats;
  Rng rng(o.sampling.seed);
  const int64_t context = target.config().max_position_embeddings;
  if (int64_t(prompt.size()) >= context) fail("prompt of {} tokens fills the model's context of {}", prompt.size(), context);
  int64_t gamma = o.gamma > 0 ? o.gamma : (drafter && drafter->max_block() > 0 ? drafter->max_block() : 5);
  if (drafter && drafter->max_block() > 0 && gamma > drafter->max_block())
    fail("--gamma {} exceeds the drafter's block size {}", gamma, drafter->max_block());
  const HiddenTaps taps = drafter ? drafter->taps() : HiddenTaps{};

  KVCache cache = target.new_cache();
  torch::NoGradGuard no_grad;
  ChunkOutput prefill = target.forward(cache, prompt, LogitsAt::Last, taps);
  stats.prefill_seconds = since(start);
  if (drafter) drafter->begin(prompt, prefill);

  auto is_eos = [&](int64_t t) { return std::find(o.eos_ids.begin(), o.eos_ids.end(), t) != o.eos_ids.end(); };
  bool done = false;
  auto emit = [&](int64_t t) {
    if (done) return;
    result.tokens.push_back(t);
    if (on_token) on_token(t);
    if (is_eos(t)) {
      result.hit_eos = true;
      done = true;
    }
    if (int64_t(result.tokens.size()) >= o.max_new_tokens) done = true;
  };
  if (o.max_new_tokens <= 0) return result;
  int64_t anchor = sample_token(prefill.logits[0], o.sampling, rng);
  emit(anchor);

  while (!done) {
    const int64_t remaining = o.max_new_tokens - int64_t(result.tokens.size());
    // Room for the anchor and n drafts in the context; no more drafts than tokens still wanted.
    int64_t n = drafter ? std::min({gamma, remaining - 1, context - cache.length() - 1}) : 0;
    if (cache.length() + 1 > context) break;
    DraftProposal proposal;
    if (n > 0) {
      const auto t0 = Clock::now();
      proposal = drafter->propose(anchor, n, o.sampling, rng);
      stats.draft_seconds += since(t0);
      n = std::min<int64_t>(n, int64_t(proposal.tokens.size()));
      if (o.verify == VerifyMode::Threshold && !proposal.confidence.empty()) {
        int64_t cut = 0;
        while (cut < n && proposal.confidence[size_t(cut)] >= o.conf_min) ++cut;
        n = cut;
      } else if ((o.verify == VerifyMode::Sts || o.verify == VerifyMode::Auto) && !proposal.conf_logits.empty()) {
        std::vector<double> survival = o.calibration ? o.calibration->survival(proposal.conf_logits)
                                                     : Calibration{}.survival(proposal.conf_logits);
        survival.resize(size_t(n));
        if (o.verify == VerifyMode::Sts) {
          int64_t cut = 0;
          while (cut < n && survival[size_t(cut)] >= o.conf_min) ++cut;
          n = cut;
        } else {
          if (!o.sps) fail("verify mode 'auto' needs an SPS profile (run dspark profile)");
          n = schedule_verify_lengths({survival}, *o.sps)[0];
        }
      }
      proposal.tokens.resize(size_t(n));
      if (!proposal.q.empty()) proposal.q.resize(size_t(n));
      if (proposal.conf_logits.size() > size_t(n)) proposal.conf_logits.resize(size_t(n));
      if (proposal.confidence.size() > size_t(n)) proposal.confidence.resize(size_t(n));
    }
    std::vector<int64_t> chunk = {anchor};
    chunk.insert(chunk.end(), proposal.tokens.begin(), proposal.tokens.end());
    const int64_t base = cache.length();
    const auto t1 = Clock::now();
    ChunkOutput verify = target.forward(cache, chunk, LogitsAt::All, taps);  // logits [n+1, V]
    const auto t2 = Clock::now();
    stats.target_seconds += std::chrono::duration<double>(t2 - t1).count();
    int64_t accepted = 0, next = 0;
    if (o.sampling.greedy()) {
      while (accepted < n && sample_token(verify.logits[accepted], o.sampling, rng) == proposal.tokens[size_t(accepted)])
        ++accepted;
      next = sample_token(verify.logits[accepted], o.sampling, rng);
    } else {
      at::Tensor p = processed_probabilities(verify.logits, o.sampling);  // [n+1, V]
      SampledVerdict v = verify_sampled(p, proposal.tokens, proposal.q, rng);
      accepted = v.accepted;
      next = v.next_token;
    }
    stats.accept_seconds += since(t2);
    if (o.on_verify && n > 0) o.on_verify(proposal, accepted);
    ++stats.steps;
    stats.n_drafted += n;
    stats.n_accepted += accepted;
    if (drafter && int64_t(stats.accepted_at.size()) < gamma) {
      stats.accepted_at.resize(size_t(gamma), 0);
      stats.drafted_at.resize(size_t(gamma), 0);
    }
    for (int64_t k = 0; k < n; ++k) ++stats.drafted_at[size_t(k)];
    for (int64_t k = 0; k < accepted; ++k) ++stats.accepted_at[size_t(k)];

    // Keep the anchor and the accepted drafts; roll back the rest.
    cache.truncate(base + 1 + accepted);
    std::vector<int64_t> kept = {anchor};
    kept.insert(kept.end(), proposal.tokens.begin(), proposal.tokens.begin() + accepted);
    if (drafter) {
      const auto t3 = Clock::now();
      drafter->commit(kept, verify);
      stats.draft_seconds += since(t3);
    }
    std::vector<int64_t> emitted(kept.begin() + 1, kept.end());
    emitted.push_back(next);
    for (int64_t t : emitted) emit(t);
    anchor = next;
  }
  stats.seconds = since(start);
  return result;
}

}  // namespace dspark
