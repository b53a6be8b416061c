// Throughput-aware verify lengths (DSpark paper, Algorithm 1) from a measured cost curve.
//
// SPS(B) = target steps per second for a verify forward of B tokens (measured by `dspark
// profile`, saved next to the model). For R requests with cumulative survival probabilities
// a_{r,j} (prod of calibrated confidences), verifying l_r drafts each costs B = sum (1 + l_r) tokens
// and yields tau = sum (1 + sum_{j<=l_r} a_{r,j}) expected tokens: maximise tau * SPS(B). Candidates
// are admitted in descending a; the search STOPS at the first one that does not improve the
// throughput, which keeps the decision for x_{r,j} independent of x_{r,j} itself (lossless; a
// retrospective global search is not, see the paper's Appendix A and the tests).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dspark {

class Transformer;

struct SpsProfile {
  std::vector<double> steps_per_second;  // [B-1] for B = 1..max
  std::string model_fingerprint;         // which model it was measured for
  std::string device, dtype;
  int64_t threads = 0;
  double sps(int64_t tokens) const;      // beyond the table: extrapolated as constant cost per token
};

// Measures SPS(B) for B = 1..max_tokens after `context` tokens, median of `repeats`, sizes interleaved.
SpsProfile measure_sps(Transformer& model, int64_t max_tokens, int64_t context, int64_t repeats);
void save_sps_profile(const std::string& path, const SpsProfile& profile);
// Throws dspark::Error if the file is malformed or was measured for another model.
SpsProfile load_sps_profile(const std::string& path, const std::string& model_fingerprint);
// A model's identity for profile files: config sizes + embedding fingerprint.
std::string model_fingerprint(Transformer& model);

// survival[r][j] = a_{r,j+1}, non-increasing in j. Returns l_r for every request.
// early_stop = false is the retrospective global search (for tests and comparisons only).
std::vector<int64_t> schedule_verify_lengths(const std::vector<std::vector<double>>& survival, const SpsProfile& sps,
                                             bool early_stop = true);

}  // namespace dspark
