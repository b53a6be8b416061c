// Whether drafting pays off at all (verify mode auto).
//
// Algorithm 1 chooses how many drafts to verify once they exist, from their survival
// probabilities and the target's cost curve SPS(R, B). The drafter's own time is spent before
// that choice, and on a small or busy target it can exceed what the accepted drafts save (a
// compute-bound target verifies 8 tokens for much more than 1). The governor keeps running means
// of what speculation cost and gave in recent steps (drafter seconds per sequence, tokens emitted
// per sequence, drafts verified per sequence) and predicts, from the same SPS table:
//
//   plain: R tokens in 1 / SPS(R, R) seconds
//   spec:  R tau tokens in R t_draft + 1 / SPS(R, R (1 + l)) seconds
//
// When plain is faster it skips drafting (every sequence verifies its anchor alone, exactly plain
// decoding), drafting again after `probe_every` steps to keep the means current; every probe that
// confirms plain decoding doubles that interval, a return to drafting halves it. The doubling
// stops at 64x, or later where probes are costly: each costs a draft block, a verify of several
// tokens and the drafter's catch-up over the skipped positions, less the tokens it gained, and the
// interval may grow until probes take at most kProbeBudget of the decoding time (on the 8.4M
// default target at temperature 1 a probe cost 1-6 plain steps, and the probes were about half of
// the 1-2% that `auto` lost to plain decoding where it did not draft).
// The first drafted step only warms up (allocations, caches) and is not counted; the next
// kMinObserved always draft, their plain mean seeding the running means. The decision
// uses only past steps, never the current drafts, so verification stays lossless.
//
// The SPS table is measured once (dspark profile: one context length, an otherwise idle machine).
// Each mode's forwards are also timed as they run: the running mean of measured / predicted
// seconds (kappa, one per mode, clamped to [1/2, 2] so that it corrects the table rather than
// replaces it) scales that mode's predicted forward time, so a table taken under other load,
// threads or context lengths does not bias the choice between plain decoding and drafting. Until
// a mode has a measured forward it takes the other mode's kappa.
#pragma once
#include <cstdint>

namespace dspark {

struct SpsProfile;

class SpeculationGovernor {
 public:
  // Steps drafted before the first decision: one step's tokens range from 1 to g + 1, so a
  // decision on the first sample alone (an unlucky block) could end drafting for good.
  static constexpr int64_t kMinObserved = 8;

  explicit SpeculationGovernor(int64_t probe_every = 16) : probe_every_(probe_every) {}

  // Should `requests` decoding sequences draft this step? A probe (probing() true afterwards)
  // needs only one of them to draft: the means are per sequence.
  bool should_draft(int64_t requests, const SpsProfile& sps);
  bool probing() const { return probing_; }
  // After a drafted step: drafter seconds per sequence, tokens emitted per sequence (accepted + 1)
  // and drafts verified per sequence, averaged over the step's sequences.
  void observe(double draft_seconds, double tokens, double verified);
  // After a forward of the auto-mode sequences alone (no prompt chunks): `tokens` rows for
  // `requests` sequences took `seconds`; `drafted` says which mode the step ran.
  void observe_forward(bool drafted, int64_t tokens, int64_t requests, double seconds, const SpsProfile& sps);
  // After a probe's step of `requests` sequences (a forward of the auto-mode sequences alone, no
  // prompt chunks): the prober's drafting seconds (catch-up included), the step's forward seconds
  // and the tokens the prober emitted. What the probe cost beyond the plain step it replaced, in
  // plain steps, spaces out the next probes.
  void observe_probe(double draft_seconds, double forward_seconds, int64_t emitted, int64_t requests,
                     const SpsProfile& sps);
  // Running mean of the drafter's seconds per sequence and drafted step (0 before the first).
  double draft_seconds() const { return observed_ > 0 ? draft_seconds_ : 0.0; }
  // A mode not measured yet borrows the other's: the table's error is mostly the host's speed now
  // against when it was measured, which both modes share (a host twice as fast as its table, with
  // only drafted forwards seen, made plain decoding look half as fast as it was, and `auto` kept
  // drafting where plain decoding was faster).
  double kappa(bool drafted) const {
    const Kappa& own = drafted ? kappa_spec_ : kappa_plain_;
    const Kappa& other = drafted ? kappa_plain_ : kappa_spec_;
    return own.seen >= 2 || other.seen < 2 ? own.value : other.value;
  }

  // Predicted tokens/s of the two choices (0 before any observation).
  double predicted_spec(int64_t requests, const SpsProfile& sps) const;
  double predicted_plain(int64_t requests, const SpsProfile& sps) const;
  int64_t skipped_steps() const { return skipped_total_; }

 private:
  static constexpr double kAlpha = 0.25;  // weight of the newest step in the running means
  // ... in the means of tokens and drafts per drafted step. One step's tokens range from 1 to
  // g + 1, and at temperature 1 they are mostly 1-2 with rare long runs: with kAlpha a few
  // unlucky steps pushed the mean under the break-even and, once plain decoding was chosen, only
  // the rare probes could lift it again (measured on the default target at temperature 1: `auto`
  // at 1.05x plain while fixed verification of 3 drafts ran at 1.24x; with 1/16, 1.16x vs 1.14x).
  static constexpr double kOutcomeAlpha = 1.0 / 16;
  static constexpr int64_t kMaxBackoff = 64;
  static constexpr double kProbeBudget = 0.001;  // the share of plain decoding's time probes may take
  // Drafting must be predicted this much faster than plain decoding: the prediction carries ~10%
  // of error (a table taken at one context length, the drafter's time varying with the load),
  // and near break-even a wrong choice to draft costs more than a wrong choice not to.
  static constexpr double kDraftMargin = 1.1;
  int64_t probe_every_;
  // Steps from one probe to the next at the current backoff, and at most.
  int64_t probe_interval() const;
  int64_t longest_probe_interval() const;
  int64_t backoff_ = 1;        // the interval is probe_every_ * backoff_, up to longest_probe_interval()
  bool warmed_up_ = false;
  bool probing_ = false;       // the step being observed was a probe
  bool probe_observed_ = false;  // ... and its outcome is in the means (the next decision weighs it)
  bool drafting_ = true;       // the last decision was to draft (not a probe)
  int64_t observed_ = 0;  // drafted steps in the means
  double draft_seconds_ = 0, tokens_ = 0, verified_ = 0;
  struct Kappa {
    double value = 1.0;
    int64_t seen = 0;  // the first forward of a mode is a warm-up and does not count
  };
  Kappa kappa_plain_, kappa_spec_;
  int64_t since_probe_ = 0, skipped_total_ = 0;
  double probe_cost_steps_ = 0;  // running mean of a probe's cost, in plain steps (the first seeds it)
  int64_t probes_seen_ = 0;
};

}  // namespace dspark
