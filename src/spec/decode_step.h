// One step of many sequences with ONE ragged target forward (continuous batching).
//
// Every sequence that is still prefilling contributes its next prompt chunk, every decoding one
// drafts and contributes its verify chunk [anchor, d_1..d_n]; the target runs all chunks at once
// (Transformer::forward over flattened rows, attention per sequence) and each sequence then
// accepts, rolls back and emits on its own. In auto mode the verify lengths of all decoding
// sequences are chosen together by Algorithm 1 over SPS(R, B), the measured throughput of a
// forward of R sequences and B tokens in all: under load, fewer drafts are verified.
#pragma once
#include <cstdint>
#include <vector>

#include "spec/spec_sequence.h"
#include "spec/speculation_governor.h"

namespace dspark {

struct StepOptions {
  int64_t prefill_chunk = 0;   // prompt tokens per sequence per step (<= 0: the whole prompt)
  int64_t prefill_budget = 0;  // prompt tokens per step over all sequences (<= 0: unlimited)
  // Auto-mode sequences draft only when the governor expects it to pay (null: always).
  SpeculationGovernor* governor = nullptr;
};

// What one step did (for metrics and tests).
struct StepReport {
  int64_t prefill_tokens = 0;  // prompt tokens in the forward
  int64_t decode_sequences = 0;
  int64_t verify_tokens = 0;   // anchors + drafts in the forward
  bool drafting_skipped = false;  // the governor chose plain decoding for the auto-mode sequences
  double forward_seconds = 0;
};

// Sequences that are done are skipped. All sequences must want the same hidden taps (one
// drafter kind per batch). Prefill chunks are taken in the given order until the budget is
// spent (at least one chunk per step, so a long prompt cannot stall).
StepReport decode_step(Transformer& target, const std::vector<SpecSequence*>& sequences, const StepOptions& options = {});

}  // namespace dspark
