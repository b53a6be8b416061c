// A DSpark (or DFlash) drafter behind the Drafter interface: keeps the drafter's context keys and
// values in step with the target's accepted prefix. The context grows lazily: commit() keeps the
// accepted positions' target hidden states and the next propose() adds them all in one call, so
// steps that do not draft (auto mode deciding that plain decoding is faster) cost no drafter time;
// the prompt's positions too join the context at the first propose().
#pragma once
#include <memory>

#include "drafter/dspark_drafter.h"
#include "spec/drafter.h"

namespace dspark {

class DSparkSource : public Drafter {
 public:
  DSparkSource(std::shared_ptr<DSparkDrafter> drafter, Transformer& target, std::string label = "dspark");
  std::string name() const override { return label_; }
  HiddenTaps taps() const override { return drafter_->taps(); }
  int64_t max_block() const override { return drafter_->config().max_drafts(); }
  void begin(const std::vector<int64_t>& prompt, const ChunkOutput& prefill) override;
  DraftProposal propose(int64_t anchor, int64_t n, const SamplingParams& params, Rng& rng) override;
  void commit(const std::vector<int64_t>& kept, const ChunkOutput& verify) override;
  int64_t catch_up() override;
  const DSparkDrafter& drafter() const { return *drafter_; }

 private:
  at::Tensor hidden(const ChunkOutput& out, int64_t rows) const;  // the first `rows` positions' taps
  at::Tensor kept_rows(const ChunkOutput& out, int64_t rows) const;  // the same, not sharing a batch's storage
  void flush_pending();
  std::vector<at::Tensor> pending_;  // taps of accepted positions not yet in the context
  std::shared_ptr<DSparkDrafter> drafter_;
  Transformer& target_;
  std::string label_;
  DSparkDrafter::Context context_;
};

}  // namespace dspark
