// One sequence of the speculative decoding loop as a state machine.
//
// The loop of generate_speculative is cut at its target forward so that the forward can be
// shared: `decode_step` (spec/decode_step.h) advances any number of sequences with ONE ragged
// target forward, whether they are prefilling their prompt (in chunks) or verifying drafts. The
// CLI runs one sequence through it, the server many; the per-sequence arithmetic is the same, so
// a request's greedy output does not depend on what else is in the batch (given row-invariant
// forward numerics, see model/ops.h).
//
//   Prefill --(last prompt chunk: sample the first token, drafter.begin)--> Decode --> Done
//   Decode step: draft() -> [scheduler may set_verify_length()] -> verify_chunk() -> forward ->
//                finish_verify(): accept, roll the cache back, drafter.commit, emit tokens.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "spec/speculative.h"

namespace dspark {

class SpecSequence {
 public:
  enum class Phase { Prefill, Decode, Done };

  // `drafter` may be null (plain decoding); it and `target` must outlive the sequence.
  // Throws dspark::Error for an empty prompt, a prompt that fills the context, a bad gamma.
  SpecSequence(Transformer& target, Drafter* drafter, std::vector<int64_t> prompt, SpecOptions options,
               std::function<void(int64_t)> on_token = {});

  Phase phase() const { return phase_; }
  bool done() const { return phase_ == Phase::Done; }
  const SpecOptions& options() const { return options_; }
  HiddenTaps taps() const { return taps_; }
  int64_t prompt_length() const { return int64_t(prompt_.size()); }
  int64_t prefilled() const { return prefilled_; }

  // Prefill: the next piece of the prompt, at most `max_tokens` (<= 0: the rest).
  SequenceChunk prefill_chunk(int64_t max_tokens);
  void finish_prefill_chunk(const ChunkOutput& out, double forward_seconds);

  // Decode: proposes the next block and cuts it by the verify mode (fixed, threshold, sts). In
  // auto mode the length is left to the scheduler: survival() are the calibrated a_k. With
  // `propose` false the step verifies the anchor alone (a plain decoding step).
  void draft(bool propose = true);
  bool wants_schedule() const { return schedule_; }
  const std::vector<double>& survival() const { return survival_; }
  void set_verify_length(int64_t n);  // <= the drafted length
  int64_t verify_length() const { return int64_t(proposal_.tokens.size()); }
  SequenceChunk verify_chunk();  // [anchor, d_1..d_n], logits at every position
  void finish_verify(const ChunkOutput& out, double forward_seconds);
  // The last verify step: drafts verified, and tokens emitted (accepted + 1).
  int64_t last_verified() const { return last_verified_; }
  int64_t last_emitted() const { return last_emitted_; }
  // Seconds of the last draft() that brought the drafter's context up to date with positions
  // before the previous step (Drafter::catch_up): after steps decoded without drafting, a one-off
  // that the governor does not count as a per-step cost of drafting.
  double catch_up_seconds() const { return catch_up_seconds_; }

  // Ends the sequence now (a stop string matched, the client went away); tokens emitted after
  // this call are dropped.
  void stop();

  const SpecResult& result() const { return result_; }
  SpecResult take_result();

 private:
  void emit(int64_t token);
  int64_t context() const;

  Transformer& target_;
  Drafter* drafter_;
  std::vector<int64_t> prompt_;
  SpecOptions options_;
  std::function<void(int64_t)> on_token_;
  HiddenTaps taps_;
  int64_t gamma_ = 0;
  Rng rng_;
  KVCache cache_;
  Phase phase_ = Phase::Prefill;
  int64_t prefilled_ = 0;
  std::vector<ChunkOutput> prefill_outputs_;  // prompt chunks' hidden taps until the drafter begins
  int64_t anchor_ = 0;                         // last emitted token, not yet in the cache
  DraftProposal proposal_;
  bool schedule_ = false;
  std::vector<double> survival_;
  int64_t verify_base_ = 0;  // cache length before the verify chunk
  int64_t last_verified_ = 0, last_emitted_ = 0;
  double catch_up_seconds_ = 0;  // the last draft()'s drafter catch-up
  SpecResult result_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dspark
