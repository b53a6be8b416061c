// Algorithm 1 and STS: the paper's Appendix A counterexample (early stop keeps the target
// distribution, the retrospective global search does not) and calibration of synthetic confidences.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "spec/calibration.h"
#include "spec/scheduler.h"

namespace dspark {
namespace {

SpsProfile profile(std::vector<double> sps) {
  SpsProfile p;
  p.steps_per_second = std::move(sps);
  return p;
}

TEST(Scheduler, AdmitsWhileThroughputImproves) {
  // Verifying 2 tokens costs barely more than 1: confident drafts are worth it.
  SpsProfile sps = profile({100, 95, 90, 85, 50});
  EXPECT_EQ(schedule_verify_lengths({{0.9, 0.8, 0.7, 0.1}}, sps)[0], 3);
  EXPECT_EQ(schedule_verify_lengths({{0.01, 0.001}}, sps)[0], 0);
  // Two requests share the batch budget; the most confident candidates go first.
  auto l = schedule_verify_lengths({{0.95, 0.9}, {0.5, 0.1}}, profile({100, 99, 98, 97, 60, 30}));
  EXPECT_EQ(l[0], 2);
  EXPECT_EQ(l[1], 0);
}

// The cycle's drafting time counts against every length alike: a third draft worth 8% more tokens
// for a forward 12% dearer is cut when the forward is the whole cycle, and verified when the
// cycle also holds 0.9 ms of drafting (2.17 / 4.95 ms > 1.96 / 4.50 ms). A forward measured
// slower than the table (forward_scale) shrinks the drafting's share again.
TEST(Scheduler, CountsTheCyclesDraftingTime) {
  const SpsProfile sps = profile({300, 290, 278, 247});
  const std::vector<std::vector<double>> survival = {{0.6, 0.36, 0.21}};
  EXPECT_EQ(schedule_verify_lengths(survival, sps)[0], 2);
  EXPECT_EQ(schedule_verify_lengths(survival, sps, true, 0.0009)[0], 3);
  EXPECT_EQ(schedule_verify_lengths(survival, sps, true, 0.0009, 4.0)[0], 2);
}

// Appendix A: R = 1, gamma = 2, a1 = 0.8, SPS = (1.0, 0.5, 0.45); vocabulary {A, B},
// p_t = (0.7, 0.3), p_d = (0.5, 0.5); x1 = A gives c2 = 0.9, x1 = B gives c2 = 0.
// Exact probability that the first emitted token is A.
double first_token_prob_A(bool early_stop) {
  const SpsProfile sps = profile({1.0, 0.5, 0.45});
  const double pt[2] = {0.7, 0.3}, pd[2] = {0.5, 0.5};
  double prob_a = 0;
  for (int x1 = 0; x1 < 2; ++x1) {
    const double c2 = x1 == 0 ? 0.9 : 0.0;
    const int64_t l = schedule_verify_lengths({{0.8, 0.8 * c2}}, sps, early_stop)[0];
    double out_a;
    if (l == 0) {
      out_a = pt[0];  // the target's own token
    } else {
      const double accept = std::min(1.0, pt[x1] / pd[x1]);
      // Residual norm(max(p_t - p_d, 0)) = all mass on A.
      out_a = (x1 == 0 ? accept : 0.0) + (1 - accept) * 1.0;
    }
    prob_a += pd[x1] * out_a;
  }
  return prob_a;
}

// A noisy table (T = 4 measured faster than T = 3) is fitted non-decreasing in step time: the
// violating pair becomes its mean, the rest is kept.
TEST(Scheduler, MonotoneProfileRemovesDips) {
  SpsProfile p = profile({100, 50, 40, 50, 20});
  p.batch = {{80, 90}};
  const SpsProfile m = monotone_sps_profile(p);
  ASSERT_EQ(m.steps_per_second.size(), 5u);
  EXPECT_DOUBLE_EQ(m.steps_per_second[0], 100);
  EXPECT_DOUBLE_EQ(m.steps_per_second[1], 50);
  EXPECT_NEAR(1.0 / m.steps_per_second[2], (1.0 / 40 + 1.0 / 50) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(m.steps_per_second[2], m.steps_per_second[3]);
  EXPECT_DOUBLE_EQ(m.steps_per_second[4], 20);
  EXPECT_DOUBLE_EQ(m.batch[0][0], m.batch[0][1]);
  for (size_t i = 1; i < m.steps_per_second.size(); ++i) EXPECT_LE(m.steps_per_second[i], m.steps_per_second[i - 1]);
}

// A saved table keeps the thread count and kernel paths it was measured with; one taken with
// others (or an older file without them) is not current, so verify_setup measures again.
TEST(Scheduler, ProfileRecordsThreadsAndKernels) {
  SpsProfile p = profile({100, 90, 80});
  p.model_fingerprint = "m";
  p.threads = at::get_num_threads();
  p.kernels = measured_kernels(true);
  EXPECT_FALSE(p.kernels.empty());
  EXPECT_TRUE(measured_kernels(false).empty());
  EXPECT_TRUE(sps_profile_current(p, true));
  const std::string path = ::testing::TempDir() + "sps_profile_kernels.json";
  save_sps_profile(path, p);
  const SpsProfile loaded = load_sps_profile(path, "m");
  EXPECT_EQ(loaded.kernels, p.kernels);
  EXPECT_EQ(loaded.threads, p.threads);
  EXPECT_TRUE(sps_profile_current(loaded, true));
  SpsProfile other = p;
  other.kernels = "scalar packed:none";
  EXPECT_FALSE(sps_profile_current(other, true));
  other = p;
  other.threads += 1;
  EXPECT_FALSE(sps_profile_current(other, true));
  std::ofstream(path) << "{\"kind\": \"dspark-sps-profile\", \"model\": \"m\", \"threads\": " << p.threads
                      << ", \"steps_per_second\": [3, 2]}";
  EXPECT_FALSE(sps_profile_current(load_sps_profile(path, "m"), true));
  std::filesystem::remove(path);
}

TEST(Scheduler, AppendixACounterexample) {
  EXPECT_NEAR(first_token_prob_A(true), 0.7, 1e-12);   // lossless
  EXPECT_NEAR(first_token_prob_A(false), 0.85, 1e-12);  // biased towards A
  // The global search really does look past the first non-improving candidate.
  EXPECT_EQ(schedule_verify_lengths({{0.8, 0.72}}, profile({1.0, 0.5, 0.45}), false)[0], 2);
  EXPECT_EQ(schedule_verify_lengths({{0.8, 0.72}}, profile({1.0, 0.5, 0.45}), true)[0], 0);
}

TEST(Calibration, StsRemovesAKnownMiscalibration) {
  // True per-position conditional acceptance p_k = sigmoid(u_k); the head reports z_k = 3 u_k
  // (over-confident by temperature 3).
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0.5, 1.5);
  std::uniform_real_distribution<double> uniform(0, 1);
  CalibrationData data;
  const int g = 4;
  for (int s = 0; s < 20000; ++s) {
    std::vector<double> z;
    int64_t accepted = 0;
    bool alive = true;
    for (int k = 0; k < g; ++k) {
      const double u = normal(rng);
      z.push_back(3.0 * u);
      const bool ok = uniform(rng) < 1.0 / (1.0 + std::exp(-u));
      if (alive && ok) ++accepted;
      else alive = false;
    }
    data.conf_logits.push_back(z);
    data.accepted.push_back(accepted);
  }
  const auto before = calibration_metrics(data, std::vector<double>(g, 1.0));
  Calibration c = fit_sts(data, g);
  const auto after = calibration_metrics(data, c.temperatures);
  for (int k = 0; k < g; ++k) {
    EXPECT_GT(before[k].ece, 0.05) << k;
    EXPECT_LT(after[k].ece, 0.02) << k;
    EXPECT_LT(after[k].brier, before[k].brier) << k;
    EXPECT_NEAR(c.temperatures[k], 3.0, 0.8) << k;
    EXPECT_GT(after[k].auroc, 0.7) << k;
  }
}

}  // namespace
}  // namespace dspark
