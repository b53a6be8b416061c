// A reduced draft vocabulary (d2t): the most frequent tokens are chosen deterministically; the
// loss is that of a drafter with q = 0 outside; a reduced drafter computes exactly the full
// drafter's logits on its columns; trained with
// --draft-vocab it decodes losslessly (greedy token for token, sampled in distribution) and
// round-trips through save/load; a drafter without it is stored exactly as before; a malformed
// d2t is refused with one line naming the file and the tensor; DeepSpec export is refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "drafter/deepspec_format.h"
#include "drafter/draft_vocab.h"
#include "drafter/dspark_drafter.h"
#include "drafter/dspark_loss.h"
#include "generation/autoregressive.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "spec/dspark_source.h"
#include "spec/speculative.h"
#include "support/run_cli.h"
#include "support/greedy_lossless.h"
#include "support/sampled_chi_square.h"
#include "support/self_distilled_data.h"
#include "support/tiny_models.h"
#include "support/train_log.h"
#include "train/drafter_trainer.h"
#include "train/regen.h"
#include "util/error.h"

namespace dspark {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using torch::indexing::Slice;

constexpr int64_t kVocab = 97;       // tiny_config_json's default
constexpr int64_t kDraftVocab = 40;  // the reduced drafters' Vd

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DraftVocab, MostFrequentTokensBreakTiesByIdAndAreSorted) {
  const std::vector<int64_t> counts = {5, 2, 7, 2, 0, 2};
  auto ids = [&](int64_t n) {
    at::Tensor t = most_frequent_tokens(counts, n);
    EXPECT_EQ(t.scalar_type(), torch::kInt64);
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  };
  EXPECT_EQ(ids(1), (std::vector<int64_t>{2}));
  EXPECT_EQ(ids(3), (std::vector<int64_t>{0, 1, 2}));        // 2 (7), 0 (5), then 1 of the ties 1, 3, 5
  EXPECT_EQ(ids(5), (std::vector<int64_t>{0, 1, 2, 3, 5}));  // all seen ones
  EXPECT_EQ(ids(6), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(most_frequent_tokens(counts, 0), Error);
  EXPECT_THROW(most_frequent_tokens(counts, 7), Error);
  const at::Tensor d2t = most_frequent_tokens(counts, 3);
  EXPECT_TRUE(torch::equal(target_to_draft(d2t, 6), torch::tensor({0, 1, 2, -1, -1, -1}, torch::kInt64)));
}

// The reduced loss is the full one of a drafter whose q is 0 outside the draft vocabulary: L1 and
// TV (hence tau and the BCE label) equal the full-vocabulary terms with those columns at -inf; a
// label outside adds 0 to CE and stays in the normaliser.
TEST(DraftVocab, ReducedLossIsTheLossOfADrafterWithZeroOutside) {
  torch::manual_seed(4);
  const at::Tensor d2t = torch::tensor({0, 2, 4}, torch::kInt64), outside_ids = torch::tensor({1, 3}, torch::kInt64);
  at::Tensor full_logits = torch::randn({1, 2, 5});
  full_logits.index_fill_(-1, outside_ids, -1e9f);  // softmax: exactly 0 there
  const at::Tensor full_target = torch::softmax(torch::randn({1, 2, 5}), -1);
  const at::Tensor conf = torch::randn({1, 2});
  const at::Tensor valid = torch::ones({1, 2}, torch::kBool);
  DSparkLossWeights w;  // 0.1 / 0.9 / 1.0, decay 4
  const at::Tensor logits = full_logits.index_select(-1, d2t);
  const DSparkLoss reduced = dspark_loss(logits, conf, full_target.index_select(-1, d2t),
                                         torch::tensor({{1, -1}}, torch::kInt64), valid, w,
                                         full_target.index_select(-1, outside_ids).sum(-1));
  const DSparkLoss full = dspark_loss(full_logits, conf, full_target, torch::tensor({{2, 3}}, torch::kInt64), valid, w);
  EXPECT_TRUE(torch::allclose(reduced.tv, full.tv, 1e-6, 1e-6));
  EXPECT_NEAR(reduced.l1.item<double>(), full.l1.item<double>(), 1e-6);
  EXPECT_NEAR(reduced.bce.item<double>(), full.bce.item<double>(), 1e-6);
  const double w1 = std::exp(-1.0 / 4.0);
  const double ce0 = -torch::log_softmax(logits[0][0], -1)[1].item<double>();
  EXPECT_NEAR(reduced.ce.item<double>(), ce0 / (1.0 + w1), 1e-6);
}

// Every third id and a few more: a sorted subset of the tiny vocabulary of size kDraftVocab.
at::Tensor some_ids() {
  std::vector<int64_t> ids;
  for (int64_t t = 0; t < kVocab && int64_t(ids.size()) < kDraftVocab; t += 3) ids.push_back(t);
  for (int64_t t = 1; int64_t(ids.size()) < kDraftVocab; t += 3) ids.push_back(t);
  std::sort(ids.begin(), ids.end());
  return torch::tensor(ids, torch::kInt64);
}

// A reduced drafter whose parameters are the full drafter's (W2: its rows of d2t) computes the
// full drafter's logits on the d2t columns, in training and in the inference walk, and its walk
// drafts target ids.
class ReducedHead : public ::testing::TestWithParam<MarkovKind> {};

TEST_P(ReducedHead, LogitsAreTheFullDrafterColumnsOfD2t) {
  auto target = testing::tiny_model("qwen3", torch::kFloat32, 3);
  DSparkConfig config = testing::tiny_drafter_config(4, GetParam(), ContextMode::Layers);
  DSparkDrafter full(config, TargetIdentity::of(*target), 5);
  config.draft_vocab_size = kDraftVocab;
  const at::Tensor d2t = some_ids();
  DSparkDrafter reduced(config, *target, 5, d2t);
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : full.named_parameters())
    if (name.rfind("markov.", 0) == 0 || name.rfind("conf.", 0) == 0) t.copy_(torch::randn_like(t) * 0.3);
  const NamedParameters source = full.named_parameters();
  for (auto& [name, t] : reduced.named_parameters()) {
    const at::Tensor& from = std::find_if(source.begin(), source.end(), [&](auto& p) { return p.first == name; })->second;
    t.copy_(name == "markov.w2" ? from.index_select(0, d2t) : from);
  }
  EXPECT_EQ(reduced.d2t().sizes(), (std::vector<int64_t>{kDraftVocab}));

  torch::manual_seed(2);
  const at::Tensor tokens = torch::randint(0, kVocab, {1, 20}, torch::kInt64);
  std::vector<at::Tensor> layer_hidden;
  target->forward_full(tokens, full.taps(), &layer_hidden);
  const at::Tensor feats = full.features_from(torch::stack(layer_hidden, 2));  // [1, 20, F]
  const int64_t a = 9, g = 4;
  at::Tensor anchors = torch::tensor({{a}}, torch::kInt64);
  at::Tensor anchor_token = tokens.index({Slice(), Slice(a, a + 1)});
  at::Tensor prev = tokens.index({Slice(), Slice(a, a + g)}).view({1, 1, g});
  auto f = full.forward_train(*target, feats, anchors, anchor_token, prev);
  auto r = reduced.forward_train(*target, feats, anchors, anchor_token, prev);
  ASSERT_EQ(r.logits.size(-1), kDraftVocab);
  EXPECT_TRUE(torch::allclose(r.logits, f.logits.index_select(-1, d2t), 1e-5, 1e-5));
  if (config.confidence) {
    EXPECT_TRUE(torch::allclose(r.conf_logits, f.conf_logits, 1e-5, 1e-5));
  }

  // The inference walk with the same (forced) tokens gives the training logits...
  DSparkDrafter::Context ctx = reduced.new_context();
  reduced.extend_context(ctx, feats[0].index({Slice(0, a)}));
  std::vector<int64_t> forced;
  for (int64_t k = 1; k <= g; ++k) forced.push_back(tokens[0][a + k].item<int64_t>());
  auto walk = reduced.draft(*target, ctx, tokens[0][a].item<int64_t>(), g, SamplingParams{}, nullptr, &forced);
  EXPECT_TRUE(torch::allclose(walk.logits, r.logits[0][0], 1e-4, 1e-4));
  // ...and a free walk drafts target ids of the draft vocabulary, greedy and sampled, with q over
  // the whole vocabulary and 0 outside d2t.
  const at::Tensor t2d = target_to_draft(d2t, kVocab);
  auto greedy = reduced.draft(*target, ctx, tokens[0][a].item<int64_t>(), g, SamplingParams{}, nullptr);
  for (int64_t t : greedy.tokens) EXPECT_GE(t2d[t].item<int64_t>(), 0) << t;
  SamplingParams hot;
  hot.temperature = 1.0;
  Rng rng(7);
  auto sampled = reduced.draft(*target, ctx, tokens[0][a].item<int64_t>(), g, hot, &rng);
  ASSERT_EQ(sampled.q.size(), size_t(g));
  for (size_t k = 0; k < sampled.q.size(); ++k) {
    const at::Tensor& q = sampled.q[k];
    ASSERT_EQ(q.size(0), kVocab);
    EXPECT_GT(q[sampled.tokens[k]].item<double>(), 0.0);
    EXPECT_NEAR(q.index_select(0, d2t).sum().item<double>(), 1.0, 1e-5);
    EXPECT_EQ(q.masked_select(t2d < 0).abs().sum().item<double>(), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllHeads, ReducedHead,
                         ::testing::Values(MarkovKind::None, MarkovKind::Vanilla, MarkovKind::Gated, MarkovKind::Rnn));

// A drafter trained with a draft vocabulary of 40 of the tiny target's 97 tokens.
class ReducedVocabDrafter : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    at::set_num_threads(1);
    target_ = testing::tiny_model("qwen3", torch::kFloat32, 3).release();
    DrafterTrainOptions o;
    o.data_dirs = {testing::self_distilled_data(*target_, "draft_vocab_data")};
    o.out_dir = testing::temp_dir("draft_vocab_drafter") + "/run";
    o.config = testing::tiny_drafter_config(4, MarkovKind::Vanilla, ContextMode::Layers);
    o.config.init_std = 0.02;
    o.config.draft_vocab_size = kDraftVocab;
    o.steps = 30;
    o.batch_size = 4;
    o.anchors = 6;
    o.lr = 3e-3;
    o.warmup_steps = 1;
    o.eval_samples = 4;
    o.live_eval_prompts = 2;
    o.live_eval_tokens = 12;
    o.progress = false;
    data_dir_ = new std::string(o.data_dirs[0]);
    out_dir_ = new std::string(o.out_dir);
    result_ = new DrafterTrainResult(train_drafter(*target_, o));
    losses_ = new std::vector<double>(testing::logged_losses(o.out_dir));
    drafter_ = DSparkDrafter::load(o.out_dir, *target_).release();
  }
  static void TearDownTestSuite() {
    delete drafter_;
    delete losses_;
    delete result_;
    delete out_dir_;
    delete data_dir_;
    delete target_;
  }
  std::unique_ptr<Drafter> source() const {
    return std::make_unique<DSparkSource>(std::shared_ptr<DSparkDrafter>(drafter_, [](DSparkDrafter*) {}), *target_);
  }
  bool in_draft_vocab(int64_t token) const {
    const at::Tensor& d2t = drafter_->d2t();
    return (d2t == token).any().item<bool>();
  }

  static Transformer* target_;
  static DSparkDrafter* drafter_;
  static DrafterTrainResult* result_;
  static std::vector<double>* losses_;
  static std::string* data_dir_;
  static std::string* out_dir_;
};
Transformer* ReducedVocabDrafter::target_ = nullptr;
DSparkDrafter* ReducedVocabDrafter::drafter_ = nullptr;
DrafterTrainResult* ReducedVocabDrafter::result_ = nullptr;
std::vector<double>* ReducedVocabDrafter::losses_ = nullptr;
std::string* ReducedVocabDrafter::data_dir_ = nullptr;
std::string* ReducedVocabDrafter::out_dir_ = nullptr;

TEST_F(ReducedVocabDrafter, TrainsOnTheMostFrequentTokensOfTheData) {
  EXPECT_TRUE(result_->finished);
  ASSERT_GE(losses_->size(), 2u);
  EXPECT_LT(losses_->back(), losses_->front());
  EXPECT_GE(result_->eval.live_tau, 1.0);
  // d2t: the 40 most frequent predicted tokens (response tokens after the first) of the training
  // samples (the trainer holds out the last 4 for evaluation), counted here independently.
  std::vector<RegenSample> samples = read_regen_samples(*data_dir_);
  samples.resize(samples.size() - 4);
  std::vector<int64_t> counts(size_t(kVocab), 0);
  for (const auto& s : samples)
    for (size_t t = size_t(s.n_prompt) + 1; t < s.tokens.size(); ++t) ++counts[size_t(s.tokens[t])];
  EXPECT_TRUE(torch::equal(drafter_->d2t(), most_frequent_tokens(counts, kDraftVocab)));
  const json meta = json::parse(io::read_text_file(*out_dir_ + "/dspark.json"));
  EXPECT_EQ(meta["config"]["draft_vocab_size"], kDraftVocab);
  for (auto& [name, t] : drafter_->named_parameters()) {
    if (name == "markov.w2") {
      EXPECT_EQ(t.sizes(), (std::vector<int64_t>{kDraftVocab, 8}));
    }
  }
}

// Token for token, both verify modes, several draft lengths, an EOS hit early; the outputs hold
// tokens the drafter cannot propose, so those positions are always corrections.
TEST_F(ReducedVocabDrafter, GreedySpeculativeDecodingEqualsPlainDecoding) {
  torch::manual_seed(21);
  testing::GreedyLossless total;
  int64_t outside = 0;
  for (int trial = 0; trial < 5; ++trial) {
    const int64_t plen = 1 + trial * 4, max_new = 10 + trial * 8;
    at::Tensor p = torch::randint(2, kVocab, {plen}, torch::kInt64);
    const std::vector<int64_t> prompt(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + plen);
    GenerationResult plain = generate_autoregressive(*target_, prompt, max_new, SamplingParams{}, {});
    for (int64_t t : plain.tokens) outside += in_draft_vocab(t) ? 0 : 1;
    const testing::GreedyLossless r =
        testing::expect_greedy_equals_plain(*target_, [&] { return source(); }, prompt, max_new, {1, 3, 4});
    total.checked += r.checked;
    total.accepted += r.accepted;
  }
  EXPECT_GE(total.checked, 30);
  EXPECT_GT(total.accepted, 0);  // drafts were accepted, and rejected ones rolled back
  EXPECT_GT(outside, 0);         // the target emitted tokens outside the draft vocabulary
}

// Sampled verification with q = 0 outside the draft vocabulary is still exact: the first two
// tokens follow the target's joint distribution, which puts much of its mass outside.
TEST_F(ReducedVocabDrafter, SampledSpeculativeDecodingFollowsTheTargetDistribution) {
  const std::vector<int64_t> prompt = {5, 17, 42, 8, 63, 29, 11};
  {
    torch::NoGradGuard no_grad;
    KVCache cache = target_->new_cache();
    const at::Tensor p1 = torch::softmax(target_->forward(cache, prompt).logits[0], -1);
    const double inside = p1.index_select(0, drafter_->d2t()).sum().item<double>();
    EXPECT_LT(inside, 0.9) << "the check should see mass outside the draft vocabulary";
  }
  const testing::ChiSquare r = testing::first_two_tokens_chi_square(*target_, [&] { return source(); }, prompt, 3000);
  EXPECT_LT(r.chi2, r.critical) << "chi-square " << r.chi2 << " over " << r.df << " degrees of freedom";
  EXPECT_GT(r.accepted, 0);
  std::cout << "[ sampled  ] chi-square " << r.chi2 << " (" << r.df << " df, 0.001 critical " << r.critical << "), "
            << r.accepted << " drafts accepted\n";
}

TEST_F(ReducedVocabDrafter, D2tRoundTripsThroughSaveAndLoad) {
  for (c10::ScalarType dtype : {c10::kFloat, c10::kBFloat16}) {
    const std::string dir = testing::temp_dir("draft_vocab_io");
    drafter_->save(dir, dtype);
    const io::TensorStore store = io::TensorStore::open(dir, "drafter");
    ASSERT_TRUE(store.contains("d2t"));
    EXPECT_EQ(store.get("d2t").dtype, io::DType::I64);
    EXPECT_EQ(store.get("d2t").shape, (std::vector<int64_t>{kDraftVocab}));
    auto loaded = DSparkDrafter::load(dir, *target_);
    EXPECT_TRUE(torch::equal(loaded->d2t(), drafter_->d2t()));
    EXPECT_EQ(loaded->fingerprint(), drafter_->fingerprint());  // the trained drafter was stored in bf16
    // The same drafts after the same context.
    DSparkDrafter::Context a = drafter_->new_context(), b = loaded->new_context();
    const at::Tensor feats = torch::randn({9, drafter_->feature_width()});
    drafter_->extend_context(a, feats);
    loaded->extend_context(b, feats);
    auto da = drafter_->draft(*target_, a, 7, 4, SamplingParams{}, nullptr);
    auto db = loaded->draft(*target_, b, 7, 4, SamplingParams{}, nullptr);
    EXPECT_EQ(da.tokens, db.tokens);
    EXPECT_TRUE(torch::equal(da.logits, db.logits));
  }
}

TEST_F(ReducedVocabDrafter, DeepSpecExportIsRefused) {
  const std::string message = error_of([&] {
    write_deepspec(*drafter_, *target_, testing::temp_dir("draft_vocab_target"), testing::temp_dir("draft_vocab_export"),
                   c10::kBFloat16, 0);
  });
  EXPECT_NE(message.find("draft vocabulary"), std::string::npos) << message;
  EXPECT_NE(message.find("d2t"), std::string::npos) << message;
}

// drafter.safetensors of `dir` with its d2t replaced by `d2t` (undefined: removed), in `out`.
void rewrite_d2t(const std::string& dir, const std::string& out, const at::Tensor& d2t, io::DType dtype) {
  fs::copy_file(dir + "/dspark.json", out + "/dspark.json", fs::copy_options::overwrite_existing);
  const io::SafetensorsFile file = io::SafetensorsFile::open(dir + "/drafter.safetensors");
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [name, view] : file.tensors())
    if (name != "d2t") tensors.push_back({name, view.dtype, view.shape, view.data, view.nbytes});
  if (d2t.defined())
    tensors.push_back({"d2t", dtype, d2t.sizes().vec(), d2t.data_ptr(), size_t(d2t.nbytes())});
  io::write_safetensors(out + "/drafter.safetensors", tensors);
}

TEST_F(ReducedVocabDrafter, MalformedD2tIsAOneLineErrorNamingFileAndTensor) {
  const std::string dir = testing::temp_dir("draft_vocab_good");
  drafter_->save(dir, c10::kBFloat16);
  const at::Tensor good = drafter_->d2t().clone();
  auto expect_refused = [&](const std::string& what, const at::Tensor& d2t, io::DType dtype, const std::string& says) {
    const std::string bad = testing::temp_dir("draft_vocab_bad");
    rewrite_d2t(dir, bad, d2t, dtype);
    const std::string message = error_of([&] { DSparkDrafter::load(bad, *target_); });
    // The file holding the tensor; a missing tensor is in none, so the directory.
    EXPECT_NE(message.find(d2t.defined() ? bad + "/drafter.safetensors" : bad), std::string::npos) << what << ": " << message;
    EXPECT_NE(message.find("d2t"), std::string::npos) << what << ": " << message;
    EXPECT_NE(message.find(says), std::string::npos) << what << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << what << ": " << message;
  };
  expect_refused("float ids", good.to(torch::kFloat32), io::DType::F32, "I64");
  expect_refused("int32 ids", good.to(torch::kInt32), io::DType::I32, "I64");
  expect_refused("too short", good.narrow(0, 0, kDraftVocab - 1).contiguous(), io::DType::I64, "shape");
  expect_refused("2-d", good.view({kDraftVocab, 1}), io::DType::I64, "shape");
  at::Tensor high = good.clone();
  high[kDraftVocab - 1] = kVocab;
  expect_refused("id past the vocabulary", high, io::DType::I64, "outside");
  at::Tensor negative = good.clone();
  negative[0] = -1;
  expect_refused("negative id", negative, io::DType::I64, "outside");
  at::Tensor unsorted = good.clone();
  unsorted[1] = good[2];
  unsorted[2] = good[1];
  expect_refused("unsorted", unsorted, io::DType::I64, "sorted");
  at::Tensor duplicate = good.clone();
  duplicate[1] = good[0];
  expect_refused("duplicate", duplicate, io::DType::I64, "twice");
  expect_refused("missing", at::Tensor(), io::DType::I64, "missing");
  // A d2t in a drafter whose dspark.json has no draft vocabulary.
  const std::string stray = testing::temp_dir("draft_vocab_stray");
  rewrite_d2t(dir, stray, good, io::DType::I64);
  json meta = json::parse(io::read_text_file(stray + "/dspark.json"));
  meta["config"].erase("draft_vocab_size");
  io::write_text_atomic(stray + "/dspark.json", meta.dump(2) + "\n");
  const std::string message = error_of([&] { DSparkDrafter::load(stray, *target_); });
  EXPECT_NE(message.find("drafter.safetensors: tensor d2t present"), std::string::npos) << message;
}

// A drafter without a draft vocabulary is stored exactly as before the option existed: the shipped
// drafter, loaded and saved again, gives the same bytes; no d2t tensor, no draft_vocab_size key.
TEST(DraftVocab, FullVocabularyDrafterIsStoredAsBefore) {
  const std::string shipped = std::string(DSPARK_SOURCE_DIR) + "/models/default-small-dspark";
  auto target = Transformer::load(std::string(DSPARK_SOURCE_DIR) + "/models/default-small");
  auto drafter = DSparkDrafter::load(shipped, *target);
  EXPECT_FALSE(drafter->d2t().defined());
  const std::string dir = testing::temp_dir("draft_vocab_old_format");
  drafter->save(dir, c10::kBFloat16);
  EXPECT_EQ(io::read_text_file(dir + "/dspark.json"), io::read_text_file(shipped + "/dspark.json"));
  EXPECT_TRUE(io::read_text_file(dir + "/drafter.safetensors") == io::read_text_file(shipped + "/drafter.safetensors"));
  EXPECT_FALSE(io::TensorStore::open(dir, "drafter").contains("d2t"));
  EXPECT_EQ(io::read_text_file(dir + "/dspark.json").find("draft_vocab"), std::string::npos);
}

// with_draft_vocab keeps every parameter and cuts Markov W2 to the rows of d2t; a drafter that
// already has a draft vocabulary, or a d2t that is not a sorted subset, is refused.
TEST(DraftVocab, WithDraftVocabCutsW2AndKeepsTheRest) {
  auto target = testing::tiny_model("qwen3", torch::kFloat32, 3);
  DSparkDrafter full(testing::tiny_drafter_config(4, MarkovKind::Vanilla, ContextMode::Layers), TargetIdentity::of(*target), 5);
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : full.named_parameters())
    if (name.rfind("markov.", 0) == 0 || name.rfind("conf.", 0) == 0) t.copy_(torch::randn_like(t) * 0.3);
  const at::Tensor d2t = some_ids();
  auto reduced = full.with_draft_vocab(*target, d2t);
  EXPECT_TRUE(reduced->d2t().equal(d2t));
  EXPECT_EQ(reduced->config().draft_vocab_size, kDraftVocab);
  const NamedParameters source = full.named_parameters();
  for (auto& [name, t] : reduced->named_parameters()) {
    const at::Tensor& from = std::find_if(source.begin(), source.end(), [&](auto& p) { return p.first == name; })->second;
    EXPECT_TRUE(t.equal(name == "markov.w2" ? from.index_select(0, d2t) : from)) << name;
  }
  EXPECT_THROW(reduced->with_draft_vocab(*target, d2t), Error);
  EXPECT_THROW(full.with_draft_vocab(*target, d2t.flip(0).contiguous()), Error);
  EXPECT_THROW(full.with_draft_vocab(*target, torch::arange(kVocab, torch::kInt64)), Error);
}

// The command line: init-random writes a reduced-vocabulary drafter for a target on disk, which
// generates and profiles; a broken d2t and DeepSpec export are one-line errors (exit 1).
TEST(DraftVocab, CommandLine) {
  using testing::run_cli;
  const std::string dir = testing::temp_dir("draft_vocab_cli");
  std::ofstream(dir + "/config.json") << testing::tiny_config_json("qwen3", 300);
  DSparkConfig c = testing::tiny_drafter_config(4);
  std::ofstream(dir + "/drafter.json") << to_json(c).dump();
  ASSERT_EQ(run_cli("init-random --config " + dir + "/config.json --out " + dir + "/model --dtype f32").exit_code, 0);
  auto made = run_cli("init-random --drafter-for " + dir + "/model --drafter-config " + dir + "/drafter.json --draft-vocab 64 --out " +
                      dir + "/drafter");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json meta = json::parse(io::read_text_file(dir + "/drafter/dspark.json"));
  EXPECT_EQ(meta["config"]["draft_vocab_size"], 64);
  auto generated = run_cli("generate -m " + dir + "/model -d " + dir + "/drafter -p 'abc' -n 8 --json -t 1");
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  auto plain = run_cli("generate -m " + dir + "/model -p 'abc' -n 8 --json -t 1");
  EXPECT_EQ(json::parse(generated.out)["tokens"], json::parse(plain.out)["tokens"]);
  auto profiled = run_cli("profile -m " + dir + "/model -d " + dir + "/drafter --max-tokens 5 --repeats 1 --no-save "
                          "--no-bandwidth --json -t 1");
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_GT(json::parse(profiled.out)["draft_block_ms"].get<double>(), 0.0);
  EXPECT_GT(json::parse(profiled.out)["draft_block_after_verify_ms"].get<double>(), 0.0);

  // convert --draft-vocab cuts a whole-vocabulary drafter to the most frequent tokens of counts
  // (token_counts.json, written beside the cut drafter); the cut drafter decodes exactly.
  auto whole = run_cli("init-random --drafter-for " + dir + "/model --drafter-config " + dir + "/drafter.json --out " + dir + "/whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  std::vector<int64_t> counts(300, 0);
  for (int64_t t = 0; t < 300; ++t) counts[size_t(t)] = (t * 37) % 101;
  std::ofstream(dir + "/counts.json") << json{{"counts", counts}}.dump();
  std::ofstream(dir + "/prompts.jsonl") << "{\"prompt\": \"abc\"}\n{\"prompt\": \"de\"}\n";
  auto cut = run_cli("convert --draft-vocab 48 --token-counts " + dir + "/counts.json " + dir + "/whole --target " + dir +
                     "/model --out " + dir + "/cut");
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_EQ(json::parse(io::read_text_file(dir + "/cut/dspark.json"))["config"]["draft_vocab_size"], 48);
  EXPECT_EQ(json::parse(io::read_text_file(dir + "/cut/token_counts.json"))["counts"], json(counts));
  auto cut_generated = run_cli("generate -m " + dir + "/model -d " + dir + "/cut -p 'abc' -n 8 --json -t 1");
  ASSERT_EQ(cut_generated.exit_code, 0) << cut_generated.err;
  EXPECT_EQ(json::parse(cut_generated.out)["tokens"], json::parse(plain.out)["tokens"]);
  std::ofstream(dir + "/short.json") << json{{"counts", {1, 2, 3}}}.dump();
  auto short_counts = run_cli("convert --draft-vocab 48 --token-counts " + dir + "/short.json " + dir + "/whole --target " +
                              dir + "/model --out " + dir + "/cut2");
  EXPECT_TRUE(testing::is_one_line_error(short_counts)) << short_counts.err;
  // --draft-vocab N at load makes the same cut from the counts beside the drafter; the cut drafter's
  // own size is accepted, another size, or a drafter without counts, is a one-line error.
  auto no_counts = run_cli("generate -m " + dir + "/model -d " + dir + "/whole --draft-vocab 48 -p 'abc' -n 8 -t 1");
  EXPECT_TRUE(testing::is_one_line_error(no_counts)) << no_counts.err;
  EXPECT_NE(no_counts.err.find("token_counts.json"), std::string::npos) << no_counts.err;
  fs::copy_file(dir + "/counts.json", dir + "/whole/token_counts.json");
  auto load_cut = run_cli("generate -m " + dir + "/model -d " + dir + "/whole --draft-vocab 48 -p 'abc' -n 8 --json -t 1");
  ASSERT_EQ(load_cut.exit_code, 0) << load_cut.err;
  EXPECT_EQ(json::parse(load_cut.out)["tokens"], json::parse(plain.out)["tokens"]);
  EXPECT_EQ(json::parse(load_cut.out)["n_drafted"], json::parse(cut_generated.out)["n_drafted"]);
  auto profiled_cut = run_cli("profile -m " + dir + "/model -d " + dir + "/whole --draft-vocab 48 --max-tokens 2 --repeats 1 "
                              "--no-save --no-bandwidth --json -t 1");
  ASSERT_EQ(profiled_cut.exit_code, 0) << profiled_cut.err;
  EXPECT_GT(json::parse(profiled_cut.out)["draft_block_ms"].get<double>(), 0.0);
  // The cut keeps the confidence head, so the whole drafter's calibration.json applies to it.
  auto calibrated = run_cli("calibrate -m " + dir + "/model -d " + dir + "/whole --prompts " + dir + "/prompts.jsonl --out " +
                            dir + "/whole/calibration.json -n 8");
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  auto cut_auto = run_cli("generate -m " + dir + "/model -d " + dir + "/whole --draft-vocab 48 --verify auto -p 'abc' -n 8 --json -t 1");
  ASSERT_EQ(cut_auto.exit_code, 0) << cut_auto.err;
  EXPECT_EQ(json::parse(cut_auto.out)["tokens"], json::parse(plain.out)["tokens"]);
  // Sampled decoding has its own calibration: `calibrate --temp T` writes calibration-sampled.json
  // beside the drafter by default, and sampled runs read it.
  auto calibrated_sampled = run_cli("calibrate -m " + dir + "/model -d " + dir + "/whole --prompts " + dir +
                                    "/prompts.jsonl --temp 1 -n 8");
  ASSERT_EQ(calibrated_sampled.exit_code, 0) << calibrated_sampled.err;
  EXPECT_TRUE(fs::exists(dir + "/whole/calibration-sampled.json"));
  auto sampled_auto = run_cli("generate -m " + dir + "/model -d " + dir + "/whole --draft-vocab 48 --verify auto --temp 1 "
                              "-p 'abc' -n 8 --json -t 1");
  EXPECT_EQ(sampled_auto.exit_code, 0) << sampled_auto.err;
  std::ofstream(dir + "/whole/calibration-sampled.json") << "{";
  auto broken_sampled = run_cli("generate -m " + dir + "/model -d " + dir + "/whole --verify auto --temp 1 -p 'abc' -n 8 -t 1");
  EXPECT_TRUE(testing::is_one_line_error(broken_sampled)) << broken_sampled.err;
  fs::remove(dir + "/whole/calibration-sampled.json");
  auto same_size = run_cli("generate -m " + dir + "/model -d " + dir + "/cut --draft-vocab 48 -p 'abc' -n 8 --json -t 1");
  EXPECT_EQ(same_size.exit_code, 0) << same_size.err;
  auto other_size = run_cli("generate -m " + dir + "/model -d " + dir + "/cut --draft-vocab 32 -p 'abc' -n 8 -t 1");
  EXPECT_TRUE(testing::is_one_line_error(other_size)) << other_size.err;
  auto benched = run_cli("bench -m " + dir + "/model -d " + dir + "/whole --draft-vocab 0,48 --prompts " + dir +
                         "/prompts.jsonl -n 8 --verify fixed -t 1");
  ASSERT_EQ(benched.exit_code, 0) << benched.err;
  EXPECT_NE(benched.out.find("(vocab 48)"), std::string::npos) << benched.out;
  auto twice = run_cli("convert --draft-vocab 16 --token-counts " + dir + "/counts.json " + dir + "/cut --target " + dir +
                       "/model --out " + dir + "/cut3");
  EXPECT_TRUE(testing::is_one_line_error(twice)) << twice.err;

  auto exported = run_cli("convert --to deepspec " + dir + "/drafter --target " + dir + "/model --out " + dir + "/ds");
  EXPECT_TRUE(testing::is_one_line_error(exported)) << exported.err;
  EXPECT_NE(exported.err.find("d2t"), std::string::npos) << exported.err;

  fs::create_directories(dir + "/broken");
  const at::Tensor ids = torch::arange(64, torch::kInt64).flip(0).contiguous();  // descending
  rewrite_d2t(dir + "/drafter", dir + "/broken", ids, io::DType::I64);
  auto broken = run_cli("generate -m " + dir + "/model -d " + dir + "/broken -p 'abc' -n 8 -t 1");
  EXPECT_TRUE(testing::is_one_line_error(broken)) << broken.err;
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("drafter.safetensors: tensor d2t"), std::string::npos) << broken.err;
}

}  // namespace
}  // namespace dspark
