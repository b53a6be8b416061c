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
  std::vector<double> steps_per_second;  // [B-1] for B = 1..max: one sequence of B tokens
  // Batched forwards (server): batch[R-2][t-1] = SPS of R sequences of t tokens each (B = R t),
  // for R = 2..max_batch. Empty when only one sequence was measured.
  std::vector<std::vector<double>> batch;
  std::string model_fingerprint;         // which model it was measured for
  std::string device, dtype;
  int64_t threads = 0;
  // The CPU matrix paths it was measured with (measured_kernels()): a forward of 8 tokens costs
  // 1.5x one token with one path and 2x with another on the same CPU, so a table taken under
  // other kernels, or another thread count, does not describe this process (verify_setup then
  // measures again).
  std::string kernels;
  // SPS of one forward of `requests` sequences with `tokens` tokens in all (>= requests). Between
  // measured points the step time is interpolated linearly in B; beyond the table it grows as the
  // last measured cost per token; more requests than measured use the largest measured batch.
  double sps(int64_t tokens, int64_t requests = 1) const;
  int64_t max_batch() const { return 1 + int64_t(batch.size()); }
};

// The kernel paths a CPU forward takes in this process, e.g. "avx512bf16 packed:avx512" ("" for
// a forward on a GPU, "libtorch" under DSPARK_DISABLE_KERNELS).
std::string measured_kernels(bool on_cpu);
// Whether `profile` was measured with this process's thread count and kernel paths.
bool sps_profile_current(const SpsProfile& profile, bool on_cpu);

// Measures SPS(B) for B = 1..max_tokens after `context` tokens, median of `repeats`, sizes
// interleaved; with max_batch > 1 also R = 2..max_batch sequences of 1..max_tokens tokens each.
SpsProfile measure_sps(Transformer& model, int64_t max_tokens, int64_t context, int64_t repeats,
                       int64_t max_batch = 1);
// The profile with every row's step times fitted non-decreasing in tokens (pool adjacent
// violators, weights equal): a forward of more tokens never costs less, and a noisy point (T = 4
// measured faster than T = 3) would otherwise end Algorithm 1's early-stopping search at the dip.
SpsProfile monotone_sps_profile(SpsProfile profile);
void save_sps_profile(const std::string& path, const SpsProfile& profile);
// Throws dspark::Error if the file is malformed or was measured for another model.
SpsProfile load_sps_profile(const std::string& path, const std::string& model_fingerprint);
// A model's identity for profile files: config sizes + embedding fingerprint.
std::string model_fingerprint(Transformer& model);

// survival[r][j] = a_{r,j+1}, non-increasing in j. Returns l_r for every request. With R > 1
// requests the throughput is SPS(R, B) (one batched forward verifies all of them).
// early_stop = false is the retrospective global search (for tests and comparisons only).
//
// The throughput maximised is that of the whole cycle: expected tokens over
//   cycle_seconds + forward_scale / SPS(R, B),
// where cycle_seconds is the cycle's time spent whatever the lengths (the drafters', already
// spent when the lengths are chosen) and forward_scale corrects the table's forward time (the
// governor's kappa). With cycle_seconds = 0 this is Algorithm 1's tau * SPS: it prices a verified
// draft against the forward alone, which cut the third of 3 drafts at temperature 1 on the
// default target where it paid for the cycle (docs/BENCHMARKS.md).
std::vector<int64_t> schedule_verify_lengths(const std::vector<std::vector<double>>& survival, const SpsProfile& sps,
                                             bool early_stop = true, double cycle_seconds = 0.0,
                                             double forward_scale = 1.0);

}  // namespace dspark
