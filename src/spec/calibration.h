// Sequential Temperature Scaling (STS) of the confidence head (DSpark paper, Sec. 3.2).
//
// The scheduler needs a_k = prod_{i<=k} c_i to be the probability that the first k drafts all
// survive. For each position k in order, STS picks one temperature T_k (c_k = sigmoid(z_k / T_k))
// minimising the ECE of a_k against the observed event "the first k drafts were accepted", with
// T_1..T_{k-1} already fixed. Data: verify steps of real speculative decoding (fixed mode).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dspark {

struct CalibrationData {
  std::vector<std::vector<double>> conf_logits;  // per verify step: z_1..z_n of the verified drafts
  std::vector<int64_t> accepted;                 // per verify step: accepted drafts m (0..n)
};

struct PositionMetrics {
  int64_t count = 0;   // verify steps that verified position k
  double ece = 0;      // expected calibration error, 10 equal-width bins
  double auroc = 0.5;  // survival score vs the event "first k accepted"
  double brier = 0;
};

// Where a drafter's calibrations live beside it (read by generate, bench and serve): one fitted
// on greedy decoding, one on sampled decoding (`dspark calibrate --temp T`), since a draft
// survives greedy verification when it is the target's argmax and sampled verification with
// probability 1 - TV, and the head's confidences map to the two differently.
inline constexpr const char* kGreedyCalibrationFile = "calibration.json";
inline constexpr const char* kSampledCalibrationFile = "calibration-sampled.json";

struct Calibration {
  std::vector<double> temperatures;  // T_k, k = 1..g
  std::string drafter;               // fingerprint of the drafter it was fitted for
  // Cumulative calibrated survival a_1..a_n for pre-sigmoid confidences z_1..z_n.
  std::vector<double> survival(const std::vector<double>& conf_logits) const;
};

// Per-position metrics of the cumulative survival under `temperatures` (all 1: uncalibrated).
std::vector<PositionMetrics> calibration_metrics(const CalibrationData& data, const std::vector<double>& temperatures);
Calibration fit_sts(const CalibrationData& data, int64_t positions);

void save_calibration(const std::string& path, const Calibration& calibration, const std::vector<PositionMetrics>& before,
                      const std::vector<PositionMetrics>& after);
// Throws dspark::Error when malformed or fitted for another drafter.
Calibration load_calibration(const std::string& path, const std::string& drafter_fingerprint);
// Reliability diagram (predicted survival vs observed acceptance, per position, before and after).
void write_reliability_svg(const std::string& path, const CalibrationData& data, const Calibration& calibration);

}  // namespace dspark
