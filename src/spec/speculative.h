// The speculative decoding loop: one target forward verifies [anchor, d_1..d_n] and keeps the
// longest acceptable prefix plus one target token, so the output is exactly (greedy) or in
// distribution (sampling) what the target alone produces. With no drafter it is plain
// autoregressive decoding through the same code.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "sampling/sampler.h"
#include "spec/calibration.h"
#include "spec/drafter.h"
#include "spec/scheduler.h"
#include "spec/speculation_governor.h"

namespace dspark {

enum class VerifyMode {
  Fixed,      // verify every drafted token
  Threshold,  // cut the block at the first raw c_k below conf_min (DeepSpec / llama.cpp)
  Sts,        // cut at the first calibrated survival a_k = prod c_i below conf_min
  Auto,       // Algorithm 1: admit drafts while expected tokens x SPS(B) improves
};
VerifyMode parse_verify_mode(const std::string& name);

// How sampled decoding (temperature > 0) verifies a block: both keep the target's output
// distribution exactly; block verification (the default) judges the drafts jointly and accepts at
// least as many in expectation.
enum class SampledVerify { Block, Token };
SampledVerify parse_sampled_verify(const std::string& name);

struct SpecOptions {
  int64_t max_new_tokens = 128;
  int64_t gamma = 0;  // drafts per block; 0: the drafter's block size (5 without one)
  SamplingParams sampling;
  std::vector<int64_t> eos_ids;
  VerifyMode verify = VerifyMode::Fixed;
  SampledVerify sampled_verify = SampledVerify::Block;
  double conf_min = 0.5;
  // STS temperatures (sts, auto) for greedy decoding, and for sampled decoding (temperature > 0,
  // where a draft survives with probability 1 - TV rather than when it is the argmax: another
  // calibration). Null: raw confidences.
  const Calibration* calibration = nullptr;
  const Calibration* sampled_calibration = nullptr;
  const Calibration* calibration_for(const SamplingParams& s) const { return s.greedy() ? calibration : sampled_calibration; }
  const SpsProfile* sps = nullptr;           // measured cost curve (auto; required there)
  // Auto mode: what past steps say about whether drafting pays (spec/speculation_governor.h).
  // Pass one that lives across calls (a benchmark, a long-running process) so that it keeps what it learnt;
  // null: a fresh one per call.
  SpeculationGovernor* governor = nullptr;
  // Called after every verify step with the verified proposal and the accepted count (calibration).
  std::function<void(const DraftProposal&, int64_t accepted)> on_verify;
};

struct SpecStats {
  int64_t steps = 0;       // target verify forwards after the prefill
  int64_t n_drafted = 0;   // draft tokens sent to verification
  int64_t n_accepted = 0;  // of those, accepted
  std::vector<int64_t> accepted_at;  // [k]: verify steps whose k-th draft (0-based) was accepted
  std::vector<int64_t> drafted_at;   // [k]: verify steps that verified a k-th draft
  // Where the time goes (wall seconds): the prompt's forward; the drafter (propose + commit);
  // target verify forwards; acceptance (greedy compare or sampled verification incl. softmax);
  // the rest of the loop (scheduling, bookkeeping, KV rollback): seconds minus the others.
  double prefill_seconds = 0, draft_seconds = 0, target_seconds = 0, accept_seconds = 0, seconds = 0;
  double other_seconds() const { return seconds - prefill_seconds - draft_seconds - target_seconds - accept_seconds; }
  // Mean tokens emitted per verify step, incl. the target's own token (the bonus/correction).
  double tau() const { return steps ? double(n_accepted + steps) / double(steps) : 0.0; }
  // Per position k: fraction of verify steps whose k-th draft was accepted (unconditional).
  std::vector<double> acceptance_per_position() const;
  void add(const SpecStats& other);
};

struct SpecResult {
  std::vector<int64_t> tokens;  // generated tokens (EOS included when hit)
  bool hit_eos = false;
  SpecStats stats;
};

// `drafter` may be null (plain decoding). `on_token` sees each emitted token as it is decided.
SpecResult generate_speculative(Transformer& target, Drafter* drafter, const std::vector<int64_t>& prompt,
                                const SpecOptions& options, const std::function<void(int64_t)>& on_token = {});

// One sampled verification (exposed for tests): target probabilities p [n+1, V] (processed), the
// drafts and their q (empty: one-hot). Returns the accepted count m and the next token. Token:
// each draft accepted with probability min(1, p/q) until the first rejection, the next token from
// norm(max(p - q, 0)) there (Leviathan et al.); Block: see SampledVerify.
struct SampledVerdict {
  int64_t accepted = 0;
  int64_t next_token = 0;
};
SampledVerdict verify_sampled(const at::Tensor& p, const std::vector<int64_t>& drafts, const std::vector<at::Tensor>& q,
                              Rng& rng, SampledVerify rule);

}  // namespace dspark
