// The drafter interface of the speculative decoder. A drafter proposes up to n tokens after the
// last emitted token (the anchor), optionally with the distributions q_k it drew them from and
// confidences c_k, and is told what the target kept so it can roll its own state back.
#pragma once
#include <ATen/Tensor.h>

#include <string>
#include <vector>

#include "model/transformer.h"
#include "sampling/sampler.h"

namespace dspark {

struct DraftProposal {
  std::vector<int64_t> tokens;
  std::vector<at::Tensor> q;        // [V] each, processed like the target's p; empty: one-hot q
  std::vector<double> confidence;   // c_k when the drafter has a confidence head
  std::vector<double> conf_logits;  // pre-sigmoid z_k (calibration)
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Target hidden states the drafter wants from every target forward (prefill and verify).
  virtual HiddenTaps taps() const { return {}; }
  // Largest n this drafter can propose in one block (0: unlimited).
  virtual int64_t max_block() const { return 0; }
  // A new sequence: the prompt, and the target's prefill output for it (taps as requested).
  virtual void begin(const std::vector<int64_t>& prompt, const ChunkOutput& prefill) = 0;
  // Up to n tokens following `anchor` (the last emitted token, not yet in the target cache).
  virtual DraftProposal propose(int64_t anchor, int64_t n, const SamplingParams& params, Rng& rng) = 0;
  // Brings the drafter's own state up to date with the positions committed before the last
  // commit() (work that propose() would otherwise do first) and returns how many that took. What
  // the last commit() added stays for propose(), as in a step of continuous drafting; the caller
  // times the rest apart: after steps decoded without drafting it is a one-off.
  virtual int64_t catch_up() { return 0; }
  // After verification: the target kept `kept` = [anchor, accepted drafts...] of its verify chunk
  // (now in its cache); `verify` is the verify forward's output (rows 0..kept.size()-1 are the
  // kept positions). The next anchor is the target's own token, passed to the next propose().
  virtual void commit(const std::vector<int64_t>& kept, const ChunkOutput& verify) = 0;
};

}  // namespace dspark
