// A DSpark (or DFlash) drafter behind the Drafter interface: keeps the drafter's context keys and
// values in step with the target's accepted prefix.
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
  const DSparkDrafter& drafter() const { return *drafter_; }

 private:
  at::Tensor features(const ChunkOutput& out, int64_t rows) const;
  std::shared_ptr<DSparkDrafter> drafter_;
  Transformer& target_;
  std::string label_;
  DSparkDrafter::Context context_;
};

}  // namespace dspark
