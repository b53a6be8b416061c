#include "spec/speculation_governor.h"

#include <algorithm>

#include "spec/scheduler.h"

namespace dspark {

double SpeculationGovernor::predicted_plain(int64_t requests, const SpsProfile& sps) const {
  return double(requests) * sps.sps(requests, requests) / kappa(false);
}

double SpeculationGovernor::predicted_spec(int64_t requests, const SpsProfile& sps) const {
  if (observed_ == 0) return 0.0;
  const auto tokens = int64_t(double(requests) * (1.0 + verified_) + 0.5);
  const double seconds =
      double(requests) * draft_seconds_ + kappa(true) / sps.sps(std::max(tokens, requests), requests);
  return double(requests) * tokens_ / seconds;
}

bool SpeculationGovernor::should_draft(int64_t requests, const SpsProfile& sps) {
  probing_ = false;
  if (observed_ < kMinObserved || predicted_spec(requests, sps) >= kDraftMargin * predicted_plain(requests, sps)) {
    since_probe_ = 0;
    backoff_ = 1;
    return true;
  }
  if (++since_probe_ >= probe_every_ * backoff_) {
    since_probe_ = 0;
    probing_ = true;
    return true;
  }
  ++skipped_total_;
  return false;
}

void SpeculationGovernor::observe(double draft_seconds, double tokens, double verified) {
  if (!warmed_up_) {
    warmed_up_ = true;
    return;
  }
  // The plain mean of the first samples, then running means weighting the newest by kAlpha
  // (the drafter's time) and kOutcomeAlpha (tokens and drafts per step).
  ++observed_;
  const double first = 1.0 / double(observed_);
  const double alpha = std::max(kAlpha, first), outcome_alpha = std::max(kOutcomeAlpha, first);
  draft_seconds_ += alpha * (draft_seconds - draft_seconds_);
  tokens_ += outcome_alpha * (tokens - tokens_);
  verified_ += outcome_alpha * (verified - verified_);
  // A probe that still says "plain": wait longer before the next one.
  if (probing_) backoff_ = std::min(backoff_ * 2, kMaxBackoff);
}

void SpeculationGovernor::observe_forward(bool drafted, int64_t tokens, int64_t requests, double seconds,
                                          const SpsProfile& sps) {
  if (tokens < 1 || requests < 1 || !(seconds > 0)) return;
  Kappa& k = drafted ? kappa_spec_ : kappa_plain_;
  if (k.seen++ == 0) return;
  const double ratio = std::clamp(seconds * sps.sps(tokens, requests), 0.5, 2.0);
  k.value = k.seen == 2 ? ratio : k.value + kAlpha * (ratio - k.value);
}

}  // namespace dspark
