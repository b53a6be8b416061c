// A DSpark drafter for a Gemma-4-shaped target (tests/support/tiny_models: per-layer embeddings,
// KV-shared layers, k = v on full layers, per-kind head dims, proportional RoPE, sliding window):
// it trains, and speculative decoding with it is lossless, greedy token for token and sampled in
// distribution. Its context taps a full-attention layer and a KV-shared layer, and every rejected
// draft rolls back a KV cache whose shared layers read other layers' keys and values.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>

#include "drafter/dspark_drafter.h"
#include "generation/autoregressive.h"
#include "spec/dspark_source.h"
#include "spec/speculative.h"
#include "support/greedy_lossless.h"
#include "support/sampled_chi_square.h"
#include "support/self_distilled_data.h"
#include "support/tiny_models.h"
#include "support/train_log.h"
#include "train/drafter_trainer.h"

namespace dspark {
namespace {

constexpr int64_t kVocab = 97;  // tiny_config_json's default

std::vector<int64_t> random_prompt(int64_t length) {
  at::Tensor p = torch::randint(2, kVocab, {length}, torch::kInt64);
  return std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + length);
}

class Gemma4Target : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    at::set_num_threads(1);
    target_ = testing::tiny_model("gemma4", torch::kFloat32, 3).release();
    ASSERT_EQ(target_->config().arch, Architecture::Gemma4);
    ASSERT_TRUE(target_->config().kv_shared(3));
    DrafterTrainOptions o;
    o.data_dirs = {testing::self_distilled_data(*target_, "gemma4_drafter_data")};
    o.out_dir = testing::temp_dir("gemma4_drafter") + "/run";
    o.config = testing::tiny_drafter_config(4, MarkovKind::Vanilla, ContextMode::Layers);
    o.config.target_layers = {1, 3};  // a full-attention layer (k = v) and a KV-shared one
    o.config.init_std = 0.02;
    o.steps = 30;
    o.batch_size = 4;
    o.anchors = 6;
    o.lr = 3e-3;
    o.warmup_steps = 1;
    o.eval_samples = 4;
    o.live_eval_prompts = 2;
    o.live_eval_tokens = 12;
    o.progress = false;
    result_ = new DrafterTrainResult(train_drafter(*target_, o));
    losses_ = new std::vector<double>(testing::logged_losses(o.out_dir));
    drafter_ = DSparkDrafter::load(o.out_dir, *target_).release();
  }
  static void TearDownTestSuite() {
    delete drafter_;
    delete losses_;
    delete result_;
    delete target_;
  }
  std::unique_ptr<Drafter> source() const {
    // DSparkSource shares ownership; the suite keeps the drafter alive.
    return std::make_unique<DSparkSource>(std::shared_ptr<DSparkDrafter>(drafter_, [](DSparkDrafter*) {}), *target_);
  }

  static Transformer* target_;
  static DSparkDrafter* drafter_;
  static DrafterTrainResult* result_;
  static std::vector<double>* losses_;
};
Transformer* Gemma4Target::target_ = nullptr;
DSparkDrafter* Gemma4Target::drafter_ = nullptr;
DrafterTrainResult* Gemma4Target::result_ = nullptr;
std::vector<double>* Gemma4Target::losses_ = nullptr;

TEST_F(Gemma4Target, DrafterTrainsAndLoads) {
  EXPECT_TRUE(result_->finished);
  ASSERT_GE(losses_->size(), 2u);
  EXPECT_LT(losses_->back(), losses_->front());
  EXPECT_GE(result_->eval.live_tau, 1.0);
  EXPECT_EQ(drafter_->taps().layers, (std::vector<int64_t>{1, 3}));
}

// Token for token: prompts across the sliding window (5), outputs long enough to roll the cache
// back many times, both verify modes, several draft lengths, and an EOS hit early.
TEST_F(Gemma4Target, GreedySpeculativeDecodingEqualsPlainDecoding) {
  torch::manual_seed(21);
  testing::GreedyLossless total;
  for (int trial = 0; trial < 5; ++trial) {
    const testing::GreedyLossless r = testing::expect_greedy_equals_plain(
        *target_, [&] { return source(); }, random_prompt(1 + trial * 4), 10 + trial * 8, {1, 3});
    total.checked += r.checked;
    total.accepted += r.accepted;
  }
  EXPECT_GE(total.checked, 20);
  EXPECT_GT(total.accepted, 0);  // drafts were accepted, and rejected ones rolled back
}

// Sampled verification: the first two tokens after a fixed prompt, drawn with speculative
// sampling at temperature 1, follow the target's exact joint distribution p(t1) p(t2 | t1)
// (chi-square over the cells expected to hold >= 5 draws, the rest pooled).
TEST_F(Gemma4Target, SampledSpeculativeDecodingFollowsTheTargetDistribution) {
  const testing::ChiSquare r =
      testing::first_two_tokens_chi_square(*target_, [&] { return source(); }, {5, 17, 42, 8, 63, 29, 11}, 3000);
  EXPECT_LT(r.chi2, r.critical) << "chi-square " << r.chi2 << " over " << r.df << " degrees of freedom";
  EXPECT_GT(r.accepted, 0);  // drafts were accepted as well as rejected
  std::cout << "[ sampled  ] chi-square " << r.chi2 << " (" << r.df << " df, 0.001 critical " << r.critical << "), "
            << r.accepted << " drafts accepted\n";
}

}  // namespace
}  // namespace dspark
