// train-lm: a few steps on a tiny corpus lower the loss, and a run stopped and resumed ends with
// exactly the parameters of an uninterrupted run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/bf16_training_linear.h"
#include "model/transformer.h"
#include "support/tiny_models.h"
#include "support/train_log.h"
#include "train/bpe_trainer.h"
#include "util/error.h"
#include "train/lm_trainer.h"
#include "train/token_file.h"
#include "train/window_sampler.h"

namespace dspark {
namespace {
namespace fs = std::filesystem;

struct TinySetup {
  std::string root, config, tokenizer, corpus;
};

TinySetup make_setup() {
  TinySetup s;
  s.root = testing::temp_dir("lm_trainer");
  s.corpus = s.root + "/corpus";
  fs::create_directories(s.corpus);
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += "def f" + std::to_string(i % 7) + "(x):\n    return x * " + std::to_string(i % 5) + " + 1\n\n";
  io::write_text_atomic(s.corpus + "/a.py", text);
  io::write_text_atomic(s.corpus + "/b.py", "import os\n\n" + text.substr(0, 400));
  BpeTrainer trainer({300, {"<|endoftext|>"}, 2});
  trainer.add_text(text);
  s.tokenizer = s.root + "/tok";
  fs::create_directories(s.tokenizer);
  write_tokenizer_json(s.tokenizer + "/tokenizer.json", trainer.train());
  s.config = s.root + "/config.json";
  nlohmann::json c = nlohmann::json::parse(testing::tiny_config_json("qwen3", 300));
  c["tie_word_embeddings"] = true;
  c["initializer_range"] = 0.02;
  io::write_text_atomic(s.config, c.dump());
  return s;
}

LmTrainOptions options_for(const TinySetup& s, const std::string& out, int64_t steps) {
  LmTrainOptions o;
  o.config_path = s.config;
  o.tokenizer_dir = s.tokenizer;
  o.corpus = {s.corpus};
  o.valid_corpus = {s.corpus + "/b.py"};
  o.out_dir = s.root + "/" + out;
  o.steps = steps;
  o.seq_len = 16;
  o.batch_size = 4;
  o.lr = 1e-2;
  o.warmup_steps = 2;
  o.eval_windows = 4;
  o.progress = false;
  return o;
}

using testing::logged_losses;

TEST(LmTrainer, FewStepsLowerTheLossAndExportALoadableModel) {
  at::set_num_threads(1);
  const TinySetup s = make_setup();
  LmTrainOptions o = options_for(s, "run", 40);
  const LmTrainResult r = train_lm(o);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.step, 40);
  const auto losses = logged_losses(o.out_dir);
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front() - 1.0);
  EXPECT_GE(r.valid_loss, 0.0);
  // HF layout, bf16 weights, loadable by the engine.
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "model.safetensors"})
    EXPECT_TRUE(fs::exists(o.out_dir + "/" + f)) << f;
  auto st = io::SafetensorsFile::open(o.out_dir + "/model.safetensors");
  EXPECT_EQ(st.tensors().at("model.embed_tokens.weight").dtype, io::DType::BF16);
  auto model = Transformer::load(o.out_dir);
  EXPECT_EQ(model->config().vocab_size, 300);
}

TEST(LmTrainer, ResumedRunEqualsUninterruptedRun) {
  at::set_num_threads(1);
  const TinySetup s = make_setup();
  LmTrainOptions straight = options_for(s, "straight", 12);
  train_lm(straight);

  LmTrainOptions first = options_for(s, "resumed", 12);
  first.stop_at = 5;
  const LmTrainResult part = train_lm(first);
  EXPECT_FALSE(part.finished);
  EXPECT_EQ(part.step, 5);
  // Without --resume an existing run is never overwritten.
  EXPECT_THROW(train_lm(options_for(s, "resumed", 12)), Error);
  LmTrainOptions second = options_for(s, "resumed", 12);
  second.resume = true;
  const LmTrainResult rest = train_lm(second);
  EXPECT_TRUE(rest.finished);

  auto a = io::SafetensorsFile::open(straight.out_dir + "/train/train_state.safetensors");
  auto b = io::SafetensorsFile::open(second.out_dir + "/train/train_state.safetensors");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& [name, va] : a.tensors()) {
    const auto& vb = b.tensors().at(name);
    ASSERT_EQ(va.nbytes, vb.nbytes) << name;
    EXPECT_EQ(std::memcmp(va.data, vb.data, va.nbytes), 0) << name << " differs after resume";
  }
  // Resuming with other options is refused.
  LmTrainOptions changed = options_for(s, "resumed", 12);
  changed.resume = true;
  changed.lr = 5e-3;
  EXPECT_THROW(train_lm(changed), Error);
}

TEST(TokenFile, RoundTripsAndRejectsCorruption) {
  const std::string dir = testing::temp_dir("token_file");
  std::vector<int32_t> tokens = {0, 5, 299, 7, 1};
  write_token_file(dir + "/t.tokens", tokens, 300, 42);
  TokenFile f = TokenFile::open(dir + "/t.tokens");
  EXPECT_EQ(f.size(), 5);
  EXPECT_EQ(f.at(2), 299);
  EXPECT_EQ(f.info().tokenizer_fingerprint, 42u);
  EXPECT_THROW(write_token_file(dir + "/bad.tokens", {300}, 300, 0), Error);
  std::string bytes = io::read_text_file(dir + "/t.tokens");
  io::write_text_atomic(dir + "/cut.tokens", bytes.substr(0, bytes.size() - 1));
  EXPECT_THROW(TokenFile::open(dir + "/cut.tokens"), Error);
  io::write_text_atomic(dir + "/junk.tokens", "not a token file at all, really not, at least 64 bytes long......");
  EXPECT_THROW(TokenFile::open(dir + "/junk.tokens"), Error);
}

TEST(WindowSampler, VisitsEveryWindowOncePerEpochAndIsAFunctionOfTheStep) {
  WindowSampler a(1001, 10, 3), b(1001, 10, 3);
  EXPECT_EQ(a.windows_per_epoch(), 100);
  std::vector<int> seen(100, 0);
  for (int64_t step = 0; step < 25; ++step)
    for (int64_t start : a.batch(step, 4)) ++seen[size_t(start / 10)];
  for (int c : seen) EXPECT_EQ(c, 1);
  EXPECT_EQ(a.batch(30, 4), b.batch(30, 4));  // b jumps straight to step 30
  EXPECT_NE(a.batch(0, 4), a.batch(25, 4));   // epoch 2 is reshuffled
}

}  // namespace
}  // namespace dspark

namespace dspark {
namespace {

// --matmul bf16 (AMX tiles for the linear layers' products): the loss falls as with float32, and
// a run cannot be resumed with the other product precision.
TEST(LmTrainer, Bf16MatmulsTrainAndKeepTheirIdentity) {
  if (!bf16_training_linear_available()) GTEST_SKIP() << "no AMX on this CPU";
  at::set_num_threads(1);
  const TinySetup s = make_setup();
  LmTrainOptions o = options_for(s, "bf16", 40);
  o.matmul = "bf16";
  const LmTrainResult r = train_lm(o);
  EXPECT_TRUE(r.finished);
  const auto losses = logged_losses(o.out_dir);
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front() - 1.0);
  LmTrainOptions other = options_for(s, "bf16", 40);
  other.resume = true;  // matmul f32
  EXPECT_THROW(train_lm(other), Error);
}

}  // namespace
}  // namespace dspark
