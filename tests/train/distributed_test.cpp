// Data-parallel training through the dspark command: two processes on loopback (the --nproc
// launcher) end with the parameters one process reaches on the same global batch; a checkpoint of
// two ranks resumes in one; a rank that dies makes the others fail with a one-line error instead
// of hanging.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "support/run_cli.h"
#include "support/tiny_models.h"
#include "support/train_log.h"
#include "train/bpe_trainer.h"

namespace dspark {
namespace {
namespace fs = std::filesystem;
using testing::run_cli;
using testing::RunResult;

// The parameters in two runs' checkpoints agree up to float32 summation order (the ranks' sums
// associate differently from one process's):
//  - over all parameters, mean |a - b| <= 1e-6 mean |b| (measured: about 1e-7);
//  - every element within 1% of one full AdamW step per step, |a - b| <= 0.01 lr steps. AdamW
//    moves an element by lr m / (sqrt(v) + 1e-8): where the gradient is near zero, a rounding-
//    level difference in it is divided by ~1e-8 (measured: up to 7% of that bound for train-lm,
//    0.3% for the drafter). A wrong shard or a missing reduction moves elements by ~lr.
void expect_same_parameters(const std::string& run_a, const std::string& run_b, double lr, int steps) {
  auto a = io::SafetensorsFile::open(run_a + "/train/train_state.safetensors");
  auto b = io::SafetensorsFile::open(run_b + "/train/train_state.safetensors");
  double diff_sum = 0, abs_sum = 0;
  int compared = 0;
  for (const auto& [name, va] : a.tensors()) {
    if (name.rfind("param.", 0) != 0) continue;
    const auto& vb = b.tensors().at(name);
    ASSERT_EQ(va.dtype, io::DType::F32);
    ASSERT_EQ(va.shape, vb.shape) << name;
    const float* x = static_cast<const float*>(va.data);
    const float* y = static_cast<const float*>(vb.data);
    double worst = 0;
    for (int64_t i = 0; i < va.numel(); ++i) {
      const double d = std::abs(double(x[i]) - double(y[i]));
      worst = std::max(worst, d);
      diff_sum += d;
      abs_sum += std::abs(double(y[i]));
    }
    EXPECT_LE(worst, 0.01 * lr * steps) << name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
  EXPECT_LE(diff_sum, 1e-6 * abs_sum);
}

using testing::logged_losses;

class DistributedTraining : public ::testing::Test {
 protected:
  // A tiny target (written by init-random), regenerated-style data of random token sequences
  // (24 samples of 14..40 tokens, prompt 6), a tiny drafter config, and a tiny LM corpus.
  static void SetUpTestSuite() {
    dir_ = testing::temp_dir("distributed");
    std::ofstream(dir_ + "/config.json") << testing::tiny_config_json("qwen3", 300);
    RunResult r = run_cli("init-random --config " + dir_ + "/config.json --out " + dir_ + "/target --dtype f32 --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    fs::create_directories(dir_ + "/data");
    std::mt19937_64 rng(5);
    std::string lines;
    for (int i = 0; i < 24; ++i) {
      std::vector<int64_t> tokens(14 + rng() % 27);
      for (auto& t : tokens) t = 2 + int64_t(rng() % 290);
      lines += nlohmann::json{{"id", i}, {"n_prompt", 6}, {"tokens", tokens}}.dump() + "\n";
    }
    io::write_text_atomic(dir_ + "/data/samples.jsonl", lines);
    DSparkConfig drafter = testing::tiny_drafter_config();
    drafter.init_std = 0.02;
    io::write_text_atomic(dir_ + "/drafter.json", to_json(drafter).dump());

    fs::create_directories(dir_ + "/corpus");
    std::string text;
    for (int i = 0; i < 60; ++i)
      text += "def f" + std::to_string(i % 7) + "(x):\n    return x * " + std::to_string(i % 5) + " + 1\n\n";
    io::write_text_atomic(dir_ + "/corpus/a.py", text);
    BpeTrainer trainer({300, {"<|endoftext|>"}, 2});
    trainer.add_text(text);
    fs::create_directories(dir_ + "/tok");
    write_tokenizer_json(dir_ + "/tok/tokenizer.json", trainer.train());
  }

  static std::string train_drafter(const std::string& extra) {
    return "train --target " + dir_ + "/target --data " + dir_ + "/data --config " + dir_ +
           "/drafter.json --steps 6 --batch-size 4 --anchors 4 --max-len 48 --lr 3e-3 --warmup 1 --eval-samples 4 "
           "--eval-every 100 --live-prompts 1 -t 1 " + extra;
  }
  static std::string train_lm(const std::string& extra, int batch = 4) {
    return "train-lm --config " + dir_ + "/config.json --tokenizer " + dir_ + "/tok --corpus " + dir_ +
           "/corpus --steps 6 --seq-len 16 --lr 1e-2 --warmup 2 -t 1 --batch-size " + std::to_string(batch) + " " +
           extra;
  }
  static std::string dir_;
};
std::string DistributedTraining::dir_;

TEST_F(DistributedTraining, TwoDrafterRanksEqualOneProcessOnTheGlobalBatch) {
  RunResult one = run_cli(train_drafter("--out " + dir_ + "/drafter-1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two = run_cli(train_drafter("--out " + dir_ + "/drafter-2 --nproc 2"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  expect_same_parameters(dir_ + "/drafter-2", dir_ + "/drafter-1", 3e-3, 6);
  // Rank 0 alone logs; its loss is the whole batch's.
  const auto l1 = logged_losses(dir_ + "/drafter-1"), l2 = logged_losses(dir_ + "/drafter-2");
  ASSERT_EQ(l1.size(), l2.size());
  for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l2[i], l1[i], 1e-5 * std::abs(l1[i]));
  EXPECT_EQ(std::count(two.out.begin(), two.out.end(), '\n'), 1);  // rank 0's result line only

  // The checkpoint does not depend on the world size: two ranks stop at step 3, one resumes.
  RunResult first = run_cli(train_drafter("--out " + dir_ + "/drafter-mixed --nproc 2 --stop-at 3"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  RunResult rest = run_cli(train_drafter("--out " + dir_ + "/drafter-mixed --resume"));
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  expect_same_parameters(dir_ + "/drafter-mixed", dir_ + "/drafter-1", 3e-3, 6);
}

TEST_F(DistributedTraining, TwoLmRanksEqualOneProcessOnTheGlobalBatch) {
  RunResult one = run_cli(train_lm("--out " + dir_ + "/lm-1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  RunResult two = run_cli(train_lm("--out " + dir_ + "/lm-2 --nproc 2"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  expect_same_parameters(dir_ + "/lm-2", dir_ + "/lm-1", 1e-2, 6);
  const auto l1 = logged_losses(dir_ + "/lm-1"), l2 = logged_losses(dir_ + "/lm-2");
  ASSERT_EQ(l1.size(), 1u);
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_NEAR(l2[0], l1[0], 1e-5 * l1[0]);
}

TEST_F(DistributedTraining, GlobalBatchMustSplitEvenly) {
  RunResult r = run_cli(train_lm("--out " + dir_ + "/lm-odd --nproc 2", 3));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("must be a multiple of the world size 2"), std::string::npos) << r.err;
}

TEST_F(DistributedTraining, ARankThatDiesStopsTheOthersWithAnError) {
  // Rank 1 exits at step 3: rank 0 fails at that step's all-reduce with one line, well within the
  // timeout, and the launcher reports the first failure's status.
  const auto start = std::chrono::steady_clock::now();
  RunResult r = run_cli(train_drafter("--out " + dir_ + "/drafter-dies --nproc 2 --dist-timeout 20"),
                        "DSPARK_DIST_FAULT=1:3");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(seconds, 40.0);
  EXPECT_NE(r.err.find("error: rank 0: distributed all-reduce failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: rank 1 exited with status 3"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/drafter-dies/train/train_state.safetensors"));  // no half-agreed checkpoint
}

TEST_F(DistributedTraining, AMissingRankIsAnErrorAfterTheTimeout) {
  // Rank 0 started alone: the rendezvous gives up after --dist-timeout with one line.
  const auto start = std::chrono::steady_clock::now();
  RunResult r = run_cli(train_lm("--out " + dir_ + "/lm-alone --world-size 2 --rank 0 --master 127.0.0.1:" +
                                 std::to_string(20000 + getpid() % 20000) + " --dist-timeout 2"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(testing::is_one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("cannot meet the other 1 ranks"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 30.0);
}

}  // namespace
}  // namespace dspark
