// DSpark drafter: loss terms, no leak from the anchor onwards, training forward = inference walk,
// W2 = 0 equals DFlash, persistence and target checks, and a short training run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "drafter/draft_vocab.h"
#include "drafter/dspark_drafter.h"
#include "drafter/dspark_loss.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "support/self_distilled_data.h"
#include "support/tiny_models.h"
#include "support/train_log.h"
#include "train/drafter_trainer.h"
#include "util/error.h"

namespace dspark {
namespace {
namespace fs = std::filesystem;
using torch::indexing::None;
using torch::indexing::Slice;

DSparkConfig tiny_config(MarkovKind markov, ContextMode context) {
  return testing::tiny_drafter_config(4, markov, context);
}

// Random non-zero W2 and confidence weights, so the Markov and confidence heads matter.
void randomize_heads(DSparkDrafter& d) {
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : d.named_parameters())
    if (name.rfind("markov.", 0) == 0 || name.rfind("conf.", 0) == 0) t.copy_(torch::randn_like(t) * 0.3);
}

struct Fixture {
  std::unique_ptr<Transformer> target = testing::tiny_model("qwen3", torch::kFloat32, 3);
  at::Tensor tokens = torch::randint(0, 97, {1, 20}, torch::kInt64);
  at::Tensor features(const DSparkDrafter& d) {
    std::vector<at::Tensor> layer_hidden;
    at::Tensor final_hidden;
    HiddenTaps taps = d.taps();
    target->forward_full(tokens, taps, &layer_hidden, &final_hidden);
    return d.config().context == ContextMode::Layers ? d.features_from(torch::stack(layer_hidden, 2))
                                                     : d.features_from(final_hidden);
  }
};

TEST(DSparkLoss, TermsMatchHandComputation) {
  // One block, g = 2, V = 3.
  at::Tensor logits = torch::tensor({{{1.0f, 2.0f, 0.5f}, {0.0f, 0.0f, 3.0f}}}).view({1, 2, 3});
  at::Tensor target = torch::tensor({{{0.2f, 0.7f, 0.1f}, {0.1f, 0.1f, 0.8f}}}).view({1, 2, 3});
  at::Tensor labels = torch::tensor({{1, 0}}, torch::kInt64);
  at::Tensor conf = torch::tensor({{0.3f, -1.0f}});
  at::Tensor valid = torch::ones({1, 2}, torch::kBool);
  DSparkLossWeights w;  // 0.1 / 0.9 / 1.0, decay 4
  DSparkLoss loss = dspark_loss(logits, conf, target, labels, valid, w);

  auto softmax = [](std::vector<double> z) {
    double m = *std::max_element(z.begin(), z.end()), s = 0;
    for (auto& v : z) s += (v = std::exp(v - m));
    for (auto& v : z) v /= s;
    return z;
  };
  const std::vector<double> p1 = softmax({1, 2, 0.5}), p2 = softmax({0, 0, 3});
  const double w1 = 1.0, w2 = std::exp(-1.0 / 4.0), norm = w1 + w2;
  const double ce = (w1 * -std::log(p1[1]) + w2 * -std::log(p2[0])) / norm;
  const double l1_1 = std::abs(p1[0] - 0.2) + std::abs(p1[1] - 0.7) + std::abs(p1[2] - 0.1);
  const double l1_2 = std::abs(p2[0] - 0.1) + std::abs(p2[1] - 0.1) + std::abs(p2[2] - 0.8);
  const double l1 = (w1 * l1_1 + w2 * l1_2) / norm;
  auto bce = [](double z, double y) {
    const double c = 1 / (1 + std::exp(-z));
    return -(y * std::log(c) + (1 - y) * std::log(1 - c));
  };
  const double b = (w1 * bce(0.3, 1 - 0.5 * l1_1) + w2 * bce(-1.0, 1 - 0.5 * l1_2)) / norm;
  EXPECT_NEAR(loss.ce.item<double>(), ce, 1e-5);
  EXPECT_NEAR(loss.l1.item<double>(), l1, 1e-5);
  EXPECT_NEAR(loss.bce.item<double>(), b, 1e-5);
  EXPECT_NEAR(loss.total.item<double>(), 0.1 * ce + 0.9 * l1 + 1.0 * b, 1e-5);
  // A masked position drops out of every term.
  at::Tensor only_first = torch::tensor({{true, false}});
  DSparkLoss first = dspark_loss(logits, conf, target, labels, only_first, w);
  EXPECT_NEAR(first.ce.item<double>(), -std::log(p1[1]), 1e-5);
  // CE on the target's argmax (token 1 at the first position, token 2 at the second) instead of the
  // labels; the L1 and BCE terms do not change.
  DSparkLossWeights argmax_label = w;
  argmax_label.ce_on_target_argmax = true;
  DSparkLoss am = dspark_loss(logits, conf, target, labels, valid, argmax_label);
  EXPECT_NEAR(am.ce.item<double>(), (w1 * -std::log(p1[1]) + w2 * -std::log(p2[2])) / norm, 1e-5);
  EXPECT_NEAR(am.l1.item<double>(), l1, 1e-5);
  EXPECT_NEAR(am.bce.item<double>(), b, 1e-5);
}

TEST(DSparkLoss, FusedRowKernelsEqualLibTorchOperators) {
  // Values and gradients of the fused CPU path against the LibTorch reference on random rows.
  torch::manual_seed(3);
  at::Tensor logits = torch::randn({3, 5, 301}) * 3;
  at::Tensor target = torch::softmax(torch::randn({3, 5, 301}) * 2, -1);
  at::Tensor labels = torch::randint(0, 301, {3, 5}, torch::kInt64);
  at::Tensor g_ce = torch::rand({3, 5}), g_l1 = torch::rand({3, 5});
  std::vector<at::Tensor> values, grads, l1_grads;
  for (bool fused : {false, true}) {
    at::Tensor z = logits.clone().requires_grad_(true);
    CeL1 out = ce_l1_per_position(z, target, labels, fused);
    ((out.ce * g_ce).sum() + (out.l1 * g_l1).sum()).backward();
    values.push_back(torch::stack({out.ce, out.l1}).detach());
    grads.push_back(z.grad());
    at::Tensor z1 = logits.clone().requires_grad_(true);  // the L1 term alone
    ce_l1_per_position(z1, target, labels, fused).l1.sum().backward();
    l1_grads.push_back(z1.grad());
  }
  EXPECT_TRUE(torch::allclose(values[0], values[1], 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(grads[0], grads[1], 1e-4, 1e-7)) << (grads[0] - grads[1]).abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(l1_grads[0], l1_grads[1], 1e-4, 1e-7));
  // Where p == t exactly the L1 subgradient is 0: only CE's p - onehot remains.
  at::Tensor z = logits.select(1, 0).clone().requires_grad_(true);  // [3, 301]
  at::Tensor same = torch::softmax(logits.select(1, 0), -1);
  CeL1 tie = ce_l1_per_position(z, same, labels.select(1, 0), true);
  EXPECT_LT(tie.l1.max().item<double>(), 1e-6);
  tie.l1.sum().backward();
  EXPECT_LT(z.grad().abs().max().item<double>(), 1e-7);
}

TEST(DSparkLoss, PositionWeightsDecay) {
  at::Tensor w = position_weights(7, 4.0);
  for (int k = 0; k < 7; ++k) EXPECT_NEAR(w[k].item<double>(), std::exp(-k / 4.0), 1e-6);
  // tau_probabilistic: 1 + sum of survival products.
  at::Tensor tv = torch::tensor({{0.5f, 0.0f, 1.0f}});
  EXPECT_NEAR(tau_probabilistic(tv, torch::ones({1, 3}, torch::kBool)), 1 + 0.5 + 0.5 + 0.0, 1e-6);
  // Per position, averaged over blocks whose first position is valid (the second block is not).
  at::Tensor two = torch::tensor({{0.5f, 0.0f, 1.0f}, {0.2f, 0.2f, 0.2f}});
  at::Tensor valid = torch::tensor({{true, true, true}, {false, false, false}});
  const std::vector<double> acc = accept_rate_per_position(two, valid);
  ASSERT_EQ(acc.size(), 3u);
  EXPECT_NEAR(acc[0], 0.5, 1e-6);
  EXPECT_NEAR(acc[1], 0.5, 1e-6);
  EXPECT_NEAR(acc[2], 0.0, 1e-6);
}

class DrafterKinds : public ::testing::TestWithParam<std::tuple<MarkovKind, ContextMode>> {};

TEST_P(DrafterKinds, BlockNeverSeesTheAnchorOrLaterContext) {
  Fixture f;
  auto [markov, context] = GetParam();
  DSparkDrafter d(tiny_config(markov, context), TargetIdentity::of(*f.target), 5);
  randomize_heads(d);
  torch::NoGradGuard no_grad;
  at::Tensor feats = f.features(d);
  const int64_t a = 9;
  at::Tensor anchors = torch::tensor({{a}}, torch::kInt64);
  at::Tensor anchor_tokens = f.tokens.index({Slice(), Slice(a, a + 1)});
  at::Tensor prev = f.tokens.index({Slice(), Slice(a, a + 4)}).view({1, 1, 4});
  auto base = d.forward_train(*f.target, feats, anchors, anchor_tokens, prev);
  at::Tensor changed = feats.clone();
  changed.index_put_({Slice(), Slice(a, None)}, torch::randn_like(changed.index({Slice(), Slice(a, None)})));
  auto after = d.forward_train(*f.target, changed, anchors, anchor_tokens, prev);
  EXPECT_TRUE(torch::equal(base.logits, after.logits));
  // ...while the position just before the anchor does matter (the test can fail).
  at::Tensor before = feats.clone();
  before.index_put_({Slice(), a - 1}, torch::randn_like(before.index({Slice(), a - 1})));
  auto moved = d.forward_train(*f.target, before, anchors, anchor_tokens, prev);
  EXPECT_FALSE(torch::allclose(base.logits, moved.logits));
}

TEST_P(DrafterKinds, TrainingForwardEqualsInferenceWalk) {
  Fixture f;
  auto [markov, context] = GetParam();
  DSparkDrafter d(tiny_config(markov, context), TargetIdentity::of(*f.target), 6);
  randomize_heads(d);
  torch::NoGradGuard no_grad;
  at::Tensor feats = f.features(d);
  const int64_t g = 4;
  std::vector<int64_t> anchor_list = {3, 7, 12};
  at::Tensor anchors = torch::tensor(anchor_list, torch::kInt64).view({1, 3});
  at::Tensor anchor_tokens = f.tokens.index({Slice(), anchors[0]});
  std::vector<int64_t> prev_list;
  for (int64_t a : anchor_list)
    for (int64_t k = 0; k < g; ++k) prev_list.push_back(f.tokens[0][a + k].item<int64_t>());
  at::Tensor prev = torch::tensor(prev_list, torch::kInt64).view({1, 3, g});
  auto train = d.forward_train(*f.target, feats, anchors, anchor_tokens, prev);
  for (size_t i = 0; i < anchor_list.size(); ++i) {
    const int64_t a = anchor_list[i];
    DSparkDrafter::Context ctx = d.new_context();
    d.extend_context(ctx, feats[0].index({Slice(0, a)}));
    std::vector<int64_t> forced;
    for (int64_t k = 1; k <= g; ++k) forced.push_back(f.tokens[0][a + k].item<int64_t>());
    auto walk = d.draft(*f.target, ctx, f.tokens[0][a].item<int64_t>(), g, SamplingParams{}, nullptr, &forced);
    EXPECT_TRUE(torch::allclose(walk.logits, train.logits[0][int64_t(i)], 1e-4, 1e-4)) << "anchor " << a;
    if (d.config().confidence) {
      for (int64_t k = 0; k < g; ++k)
        EXPECT_NEAR(walk.conf_logits[size_t(k)], train.conf_logits[0][int64_t(i)][k].item<double>(), 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, DrafterKinds,
                         ::testing::Combine(::testing::Values(MarkovKind::None, MarkovKind::Vanilla, MarkovKind::Gated,
                                                              MarkovKind::Rnn),
                                            ::testing::Values(ContextMode::Layers, ContextMode::Final)));

TEST(DSparkDrafter, ZeroW2EqualsDFlash) {
  Fixture f;
  DSparkDrafter dspark(tiny_config(MarkovKind::Vanilla, ContextMode::Layers), TargetIdentity::of(*f.target), 9);
  DSparkDrafter dflash(tiny_config(MarkovKind::None, ContextMode::Layers), TargetIdentity::of(*f.target), 9);
  torch::NoGradGuard no_grad;
  at::Tensor feats = f.features(dspark);
  at::Tensor anchors = torch::tensor({{2, 10}}, torch::kInt64);
  at::Tensor at = f.tokens.index({Slice(), anchors[0]});
  at::Tensor prev = torch::randint(0, 97, {1, 2, 4}, torch::kInt64);
  auto a = dspark.forward_train(*f.target, feats, anchors, at, prev);
  auto b = dflash.forward_train(*f.target, feats, anchors, at, prev);
  EXPECT_TRUE(torch::equal(a.logits, b.logits));
  // With a non-zero W2 they differ.
  randomize_heads(dspark);
  EXPECT_FALSE(torch::allclose(dspark.forward_train(*f.target, feats, anchors, at, prev).logits, b.logits));
}

TEST(DSparkDrafter, SaveLoadRoundTripAndTargetChecks) {
  Fixture f;
  DSparkDrafter d(tiny_config(MarkovKind::Vanilla, ContextMode::Layers), TargetIdentity::of(*f.target), 4);
  randomize_heads(d);
  const std::string dir = testing::temp_dir("drafter_io");
  d.save(dir);
  auto loaded = DSparkDrafter::load(dir, *f.target);
  torch::NoGradGuard no_grad;
  at::Tensor feats = f.features(d);
  at::Tensor anchors = torch::tensor({{5}}, torch::kInt64);
  at::Tensor at = f.tokens.index({Slice(), Slice(5, 6)});
  at::Tensor prev = f.tokens.index({Slice(), Slice(5, 9)}).view({1, 1, 4});
  EXPECT_TRUE(torch::equal(d.forward_train(*f.target, feats, anchors, at, prev).logits,
                           loaded->forward_train(*f.target, feats, anchors, at, prev).logits));
  EXPECT_EQ(nlohmann::json::parse(io::read_text_file(dir + "/dspark.json"))["kind"], "dspark-drafter");

  // Another target with the same sizes but other weights is refused.
  auto other = testing::tiny_model("qwen3", torch::kFloat32, 77);
  try {
    DSparkDrafter::load(dir, *other);
    FAIL() << "loaded a drafter for another target";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another target"), std::string::npos) << e.what();
  }
  // Broken directories: a clear error, never a crash.
  EXPECT_THROW(DSparkDrafter::load(dir + "/missing", *f.target), Error);
  const std::string broken = testing::temp_dir("drafter_broken");
  fs::copy(dir, broken, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const std::string tensors = broken + "/drafter.safetensors";
  std::string bytes = io::read_text_file(tensors);
  io::write_text_atomic(tensors, bytes.substr(0, bytes.size() / 2));
  EXPECT_THROW(DSparkDrafter::load(broken, *f.target), Error);
  fs::remove(tensors);
  EXPECT_THROW(DSparkDrafter::load(broken, *f.target), Error);
  io::write_text_atomic(broken + "/dspark.json", "{\"kind\": \"dspark-drafter\", ");
  EXPECT_THROW(DSparkDrafter::load(broken, *f.target), Error);
  fs::remove(broken + "/dspark.json");
  EXPECT_THROW(DSparkDrafter::load(broken, *f.target), Error);
}

// A drafter stored in bf16 has bf16-exact Markov matrices, so on the CPU its walk reads W2 in bf16
// with the AVX512-BF16 dot product (or the widening path): same logits as its training forward.
TEST(DSparkDrafter, Bf16StoredDrafterWalkEqualsTrainingForward) {
  Fixture f;
  DSparkDrafter d(tiny_config(MarkovKind::Vanilla, ContextMode::Layers), TargetIdentity::of(*f.target), 4);
  randomize_heads(d);
  const std::string dir = testing::temp_dir("drafter_bf16");
  d.save(dir, torch::kBFloat16);
  auto loaded = DSparkDrafter::load(dir, *f.target);
  loaded->use_float32_projections();  // the walk's own bf16 W2 path is what this test is about
  torch::NoGradGuard no_grad;
  const int64_t a = 5, g = loaded->config().block_size;
  at::Tensor feats = f.features(*loaded);
  at::Tensor anchors = torch::tensor({{a}}, torch::kInt64);
  at::Tensor anchor_token = f.tokens.index({Slice(), Slice(a, a + 1)});
  at::Tensor prev = f.tokens.index({Slice(), Slice(a, a + g)}).view({1, 1, g});
  auto train = loaded->forward_train(*f.target, feats, anchors, anchor_token, prev);
  DSparkDrafter::Context ctx = loaded->new_context();
  loaded->extend_context(ctx, feats[0].index({Slice(0, a)}));
  std::vector<int64_t> forced;
  for (int64_t k = 1; k <= g; ++k) forced.push_back(f.tokens[0][a + k].item<int64_t>());
  auto walk = loaded->draft(*f.target, ctx, f.tokens[0][a].item<int64_t>(), g, SamplingParams{}, nullptr, &forced);
  EXPECT_TRUE(torch::allclose(walk.logits, train.logits[0][0], 1e-4, 1e-4))
      << (walk.logits - train.logits[0][0]).abs().max().item<double>();
}

DrafterTrainOptions train_options(const std::string& data, const std::string& out, int64_t steps) {
  DrafterTrainOptions o;
  o.data_dirs = {data};
  o.out_dir = out;
  o.config = tiny_config(MarkovKind::Vanilla, ContextMode::Layers);
  o.config.init_std = 0.02;
  o.steps = steps;
  o.batch_size = 4;
  o.anchors = 6;
  o.lr = 3e-3;
  o.warmup_steps = 1;
  o.eval_samples = 4;
  o.live_eval_prompts = 2;
  o.live_eval_tokens = 12;
  o.progress = false;
  return o;
}

std::vector<double> losses(const std::string& out) { return testing::logged_losses(out); }

// Parameters and optimizer state of two runs are bit-identical.
void expect_same_train_state(const std::string& run_a, const std::string& run_b) {
  auto a = io::SafetensorsFile::open(run_a + "/train/train_state.safetensors");
  auto b = io::SafetensorsFile::open(run_b + "/train/train_state.safetensors");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& [name, va] : a.tensors()) {
    const auto& vb = b.tensors().at(name);
    EXPECT_EQ(std::memcmp(va.data, vb.data, va.nbytes), 0) << name << " differs after resume";
  }
}

TEST(DrafterTrainer, ShortRunLowersTheLossAndResumeIsExact) {
  at::set_num_threads(1);
  auto target = testing::tiny_model("qwen3", torch::kFloat32, 3);
  const std::string data = testing::self_distilled_data(*target, "drafter_data");
  const std::string root = testing::temp_dir("drafter_train");

  auto straight = train_options(data, root + "/straight", 40);
  DrafterTrainResult r = train_drafter(*target, straight);
  EXPECT_TRUE(r.finished);
  auto l = losses(straight.out_dir);
  ASSERT_EQ(l.size(), 4u);
  EXPECT_LT(l.back(), l.front() * 0.95);
  EXPECT_GE(r.eval.live_tau, 1.0);
  auto loaded = DSparkDrafter::load(straight.out_dir, *target);  // the exported drafter loads
  EXPECT_EQ(loaded->config().block_size, 4);

  auto first = train_options(data, root + "/resumed", 40);
  first.stop_at = 15;
  EXPECT_FALSE(train_drafter(*target, first).finished);
  auto second = train_options(data, root + "/resumed", 40);
  second.resume = true;
  EXPECT_TRUE(train_drafter(*target, second).finished);
  expect_same_train_state(straight.out_dir, second.out_dir);
}

TEST(DrafterTrainer, HiddenCacheTrainsLikeOnlineAndResumesExactly) {
  // --cache-hidden: the same run as the online one up to bf16 rounding of the target's hidden
  // states, and a cached run interrupted and resumed ends bit-identical to an uninterrupted one.
  at::set_num_threads(1);
  auto target = testing::tiny_model("qwen3", torch::kFloat32, 3);
  const std::string data = testing::self_distilled_data(*target, "drafter_data");
  const std::string root = testing::temp_dir("drafter_train_cache");
  auto online = train_options(data, root + "/online", 20);
  train_drafter(*target, online);
  auto cached = train_options(data, root + "/cached", 20);
  cached.cache_hidden = true;
  EXPECT_TRUE(train_drafter(*target, cached).finished);
  auto lo = losses(online.out_dir), lc = losses(cached.out_dir);
  ASSERT_EQ(lo.size(), lc.size());
  for (size_t i = 0; i < lo.size(); ++i) EXPECT_NEAR(lc[i], lo[i], 0.02 * std::abs(lo[i])) << "log line " << i;

  auto first = train_options(data, root + "/resumed", 20);
  first.cache_hidden = true;
  first.stop_at = 7;
  EXPECT_FALSE(train_drafter(*target, first).finished);
  auto second = first;
  second.stop_at = 0;
  second.resume = true;
  EXPECT_TRUE(train_drafter(*target, second).finished);
  expect_same_train_state(cached.out_dir, second.out_dir);
  // A cached run does not resume as an online one (its features differ in the last bits).
  auto other = train_options(data, root + "/resumed", 20);
  other.resume = true;
  EXPECT_THROW(train_drafter(*target, other), Error);
}

TEST(DrafterTrainer, InitFineTunesATrainedDrafterOnSeveralDataDirectories) {
  // --init: a new run starts from a trained drafter's parameters (its loss starts where that run
  // ended, not where a fresh drafter starts); --data twice: both directories' samples.
  at::set_num_threads(1);
  auto target = testing::tiny_model("qwen3", torch::kFloat32, 3);
  const std::string data = testing::self_distilled_data(*target, "drafter_data");
  const std::string root = testing::temp_dir("drafter_init");
  auto base = train_options(data, root + "/base", 40);
  train_drafter(*target, base);
  const std::vector<double> lb = losses(base.out_dir);
  // The counts of the training responses' tokens go beside the drafter (for --draft-vocab at load).
  EXPECT_EQ(read_token_counts(base.out_dir + "/" + kTokenCountsFile, target->config().vocab_size).size(),
            size_t(target->config().vocab_size));

  auto tuned = train_options(data, root + "/tuned", 10);
  tuned.data_dirs = {data, data};
  tuned.init_dir = base.out_dir;
  tuned.lr = 1e-4;
  EXPECT_TRUE(train_drafter(*target, tuned).finished);
  const std::vector<double> lt = losses(tuned.out_dir);
  ASSERT_FALSE(lt.empty());
  EXPECT_LT(lt.front(), lb.front() * 0.95);

  // The starting drafter fixes the architecture: another config is refused in one line.
  auto other = train_options(data, root + "/other", 10);
  other.init_dir = base.out_dir;
  other.config.block_size = 3;
  try {
    train_drafter(*target, other);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config differs"), std::string::npos) << e.what();
  }
}


TEST(DrafterTrainer, TimeBudgetSetsTheScheduleFromTheMeasuredSpeed) {
  // --minutes without --steps: the schedule length comes from the speed of the first steps and the
  // run finishes it, in roughly the budget. The bounds are loose on purpose: on a shared machine
  // the first steps (which set the schedule) can run several times slower than the rest.
  at::set_num_threads(1);
  auto target = testing::tiny_model("qwen3", torch::kFloat32, 3);
  const std::string data = testing::self_distilled_data(*target, "drafter_data");
  auto o = train_options(data, testing::temp_dir("drafter_budget") + "/run", 0);
  o.minutes = 0.1;  // 6 s
  o.eval_every = 1000000;  // only the final evaluation
  DrafterTrainResult r = train_drafter(*target, o);
  EXPECT_TRUE(r.finished);
  EXPECT_GT(r.total_steps, 12);
  EXPECT_GT(r.seconds, 0.1 * 6.0);
  EXPECT_LT(r.seconds, 6.0 + 20.0);
}

}  // namespace
}  // namespace dspark
