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
  const bool probe_observed = probe_observed_;
  probing_ = probe_observed_ = false;
  if (observed_ < kMinObserved || predicted_spec(requests, sps) >= kDraftMargin * predicted_plain(requests, sps)) {
    since_probe_ = 0;
    // Back to drafting after plain steps: probes come twice as often once plain wins again. At
    // temperature 1 one probe's long accepted run can tip the means for a few steps, and a reset to
    // the shortest interval restarted the whole ramp of probes each time.
    if (!drafting_) backoff_ = std::max<int64_t>(1, backoff_ / 2);
    drafting_ = true;
    return true;
  }
  drafting_ = false;
  // The probe just observed still says "plain": wait longer before the next one. (Doubled here,
  // once the probe's outcome is in the means, so that a probe which tips the choice back to
  // drafting halves the interval it was probed at instead of first doubling it.)
  if (probe_observed && probe_every_ * backoff_ < longest_probe_interval()) backoff_ *= 2;
  if (++since_probe_ >= probe_interval()) {
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
  probe_observed_ = probing_;
}

int64_t SpeculationGovernor::longest_probe_interval() const {
  const double affordable = std::min(probe_cost_steps_ / kProbeBudget, 1e7);
  return std::max(probe_every_ * kMaxBackoff, int64_t(affordable));
}

int64_t SpeculationGovernor::probe_interval() const {
  return std::min(probe_every_ * backoff_, longest_probe_interval());
}

void SpeculationGovernor::observe_probe(double draft_seconds, double forward_seconds, int64_t emitted,
                                        int64_t requests, const SpsProfile& sps) {
  // The plain step it replaced (the table, corrected); its extra tokens each save a sequence's
  // share of one.
  const double step = kappa(false) / sps.sps(requests, requests);
  const double extra = draft_seconds + (forward_seconds - step) - double(emitted - 1) * step / double(requests);
  double plain_steps = extra / step;
  if (!(plain_steps >= 0)) plain_steps = 0;  // a probe that paid off (or a NaN) costs nothing
  probe_cost_steps_ += (probes_seen_++ == 0 ? 1.0 : kAlpha) * (plain_steps - probe_cost_steps_);
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
