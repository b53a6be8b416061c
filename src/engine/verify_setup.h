// Shared by generate, bench and serve: turns --verify / --calibration into SpecOptions, loading the
// drafter's calibrations (DRAFTER/calibration.json for greedy decoding and
// DRAFTER/calibration-sampled.json for temperature > 0, each when present; an explicit
// --calibration serves both) and the model's SPS profile (MODEL/sps_profile.json; measured and
// saved there when missing).
#pragma once
#include <memory>
#include <string>

#include "drafter/dspark_drafter.h"
#include "spec/speculative.h"

namespace dspark {

struct VerifySetup {
  std::unique_ptr<Calibration> calibration, sampled_calibration;
  std::unique_ptr<SpsProfile> sps;
};

// `mode` empty: auto when the drafter has a confidence head, else fixed. `max_batch`: the most
// sequences one forward will verify (the server's slots); a saved profile that covers fewer is
// measured again.
void prepare_verify(SpecOptions& options, VerifySetup& setup, const std::string& mode, Transformer& target,
                    const std::string& model_dir, const DSparkDrafter* drafter, const std::string& drafter_dir,
                    const std::string& calibration_path, bool quiet, int64_t max_batch = 1);

}  // namespace dspark
