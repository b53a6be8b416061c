#include "engine/verify_setup.h"

#include <filesystem>
#include <iostream>

#include "util/error.h"

namespace dspark {
namespace fs = std::filesystem;

void prepare_verify(SpecOptions& o, VerifySetup& setup, const std::string& mode, Transformer& target,
                    const std::string& model_dir, const DSparkDrafter* drafter, const std::string& drafter_dir,
                    const std::string& calibration_path, bool quiet, int64_t max_batch) {
  const bool has_conf = drafter && drafter->config().confidence;
  o.verify = mode.empty() ? (has_conf ? VerifyMode::Auto : VerifyMode::Fixed) : parse_verify_mode(mode);
  if (o.verify == VerifyMode::Fixed) return;
  if (!has_conf) {
    if (!mode.empty() && mode != "fixed") fail("--verify {} needs a drafter with a confidence head", mode);
    o.verify = VerifyMode::Fixed;
    return;
  }
  auto load = [&](const std::string& path) {
    return std::make_unique<Calibration>(load_calibration(path, drafter->calibration_fingerprint()));
  };
  if (!calibration_path.empty()) {
    setup.calibration = load(calibration_path);
    o.calibration = o.sampled_calibration = setup.calibration.get();
  } else {
    const fs::path greedy = fs::path(drafter_dir) / kGreedyCalibrationFile;
    const fs::path sampled = fs::path(drafter_dir) / kSampledCalibrationFile;
    if (fs::exists(greedy)) setup.calibration = load(greedy.string());
    if (fs::exists(sampled)) setup.sampled_calibration = load(sampled.string());
    o.calibration = setup.calibration.get();
    o.sampled_calibration = setup.sampled_calibration.get();
  }
  if (o.verify != VerifyMode::Auto) return;
  const std::string fingerprint = model_fingerprint(target);
  const fs::path profile = fs::path(model_dir) / "sps_profile.json";
  const int64_t needed = drafter->config().block_size + 1;
  if (fs::exists(profile)) {
    setup.sps = std::make_unique<SpsProfile>(load_sps_profile(profile.string(), fingerprint));
    bool covers = int64_t(setup.sps->steps_per_second.size()) >= needed && setup.sps->max_batch() >= max_batch;
    for (const auto& row : setup.sps->batch) covers = covers && int64_t(row.size()) >= needed;
    // Measured with other threads or kernels (another machine, DSPARK_ISA): its curve's shape is
    // not this process's.
    if (!covers || !sps_profile_current(*setup.sps, target.device().is_cpu())) setup.sps.reset();
  }
  if (!setup.sps) {
    if (!quiet)
      std::cerr << "measuring SPS(B) for B = 1.." << needed << (max_batch > 1 ? fmt::format(" x batch 1..{}", max_batch) : "")
                << " (dspark profile)...\n";
    setup.sps = std::make_unique<SpsProfile>(measure_sps(target, needed, 64, 5, max_batch));
    try {
      save_sps_profile(profile.string(), *setup.sps);
    } catch (const Error&) {
      // A read-only model directory: use the measurement for this run only.
    }
  }
  *setup.sps = monotone_sps_profile(std::move(*setup.sps));
  o.sps = setup.sps.get();
}

}  // namespace dspark
