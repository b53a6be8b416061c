// End-to-end checks of the dspark command: init-random -> inspect / generate / perplexity, and
// the one-line errors a user gets for bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include "support/run_cli.h"
#include "support/tiny_models.h"
#include "drafter/dspark_drafter.h"
#include "model/transformer.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;

using testing::is_one_line_error;
using testing::run_cli;
using testing::RunResult;

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::temp_dir("cli");
    std::ofstream(dir_ + "/config.json") << testing::tiny_config_json("qwen3", 300);
    RunResult r = run_cli("init-random --config " + dir_ + "/config.json --out " + dir_ + "/model --dtype f32 --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static std::string dir_;
};
std::string CliTest::dir_;

TEST_F(CliTest, GenerateJsonHasTheDocumentedFields) {
  RunResult r = run_cli("generate -m " + dir_ + "/model -p 'def f(x):' -n 12 --json -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"text", "n_prompt", "n_generated", "seconds", "tokens_per_second"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["n_prompt"].get<int>(), 9);  // byte-level tokenizer without merges: one per byte
  EXPECT_GT(j["n_generated"].get<int>(), 0);
  EXPECT_LE(j["n_generated"].get<int>(), 12);
  // Greedy is deterministic; sampling with a seed is reproducible.
  RunResult again = run_cli("generate -m " + dir_ + "/model -p 'def f(x):' -n 12 --json -t 1");
  EXPECT_EQ(nlohmann::json::parse(again.out)["tokens"], j["tokens"]);
  auto sampled = [&](int seed) {
    RunResult s = run_cli("generate -m " + dir_ + "/model -p 'x' -n 16 --temp 1 --top-k 50 --top-p 0.9 --json --seed " + std::to_string(seed));
    return nlohmann::json::parse(s.out)["tokens"];
  };
  EXPECT_EQ(sampled(5), sampled(5));
}

TEST_F(CliTest, InspectReportsArchitectureAndParameters) {
  RunResult r = run_cli("inspect " + dir_ + "/model --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "Qwen3ForCausalLM");
  EXPECT_EQ(j["parameters"], j["parameters_expected_from_config"]);
  EXPECT_EQ(j["dtypes"].begin().key(), "F32");
}

TEST_F(CliTest, PerplexityReportsBitsPerByte) {
  std::ofstream(dir_ + "/text.txt") << "def add(a, b):\n    return a + b\n";
  RunResult r = run_cli("perplexity -m " + dir_ + "/model -f " + dir_ + "/text.txt --ctx 16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bytes"].get<int>(), 32);
  EXPECT_EQ(j["tokens"].get<int>(), 32);  // every byte-token scored exactly once across windows
  const double nll = j["nll_per_token"].get<double>();
  // A random model is close to uniform over its 300 ids.
  EXPECT_NEAR(nll, std::log(300.0), 1.0);
  EXPECT_NEAR(j["bits_per_byte"].get<double>(), nll * 32 / std::log(2.0) / 32, 1e-6);
}

TEST_F(CliTest, MissingModelDirectoryIsAOneLineError) {
  RunResult r = run_cli("generate -m " + dir_ + "/does-not-exist -p hi");
  EXPECT_TRUE(is_one_line_error(r)) << r.exit_code << " " << r.err;
  EXPECT_NE(r.err.find("does-not-exist"), std::string::npos);
}

TEST_F(CliTest, UnsupportedArchitectureIsAOneLineError) {
  fs::create_directories(dir_ + "/bad-arch");
  std::ofstream(dir_ + "/bad-arch/config.json") << R"({"architectures": ["MambaForCausalLM"], "vocab_size": 10})";
  RunResult r = run_cli("generate -m " + dir_ + "/bad-arch -p hi");
  EXPECT_TRUE(is_one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("MambaForCausalLM"), std::string::npos);
}

TEST_F(CliTest, PromptLongerThanContextIsAOneLineError) {
  std::ofstream(dir_ + "/long.txt") << std::string(400, 'a');  // 400 byte tokens > 256 context
  RunResult r = run_cli("generate -m " + dir_ + "/model -f " + dir_ + "/long.txt");
  EXPECT_TRUE(is_one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("context"), std::string::npos);
}

TEST_F(CliTest, CorruptWeightsAreAOneLineError) {
  fs::create_directories(dir_ + "/corrupt");
  fs::copy_file(dir_ + "/model/config.json", dir_ + "/corrupt/config.json", fs::copy_options::overwrite_existing);
  fs::copy_file(dir_ + "/model/tokenizer.json", dir_ + "/corrupt/tokenizer.json", fs::copy_options::overwrite_existing);
  std::ofstream(dir_ + "/corrupt/model.safetensors") << "\x10\x00\x00\x00\x00\x00\x00\x00{not json";
  RunResult r = run_cli("generate -m " + dir_ + "/corrupt -p hi");
  EXPECT_TRUE(is_one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace dspark

namespace dspark {
namespace {

// A drafter small enough to build in a test for the CLI's tiny target.
DSparkConfig small_drafter_config() {
  DSparkConfig c;
  c.block_size = 3;
  c.width = 16;
  c.num_layers = 1;
  c.num_heads = 2;
  c.head_dim = 8;
  c.ffn_size = 16;
  c.markov_rank = 4;
  c.target_layers = {0};
  return c;
}

// Speculative-decoding bad input: one line, non-zero exit.
TEST_F(CliTest, SpeculativeBadInputIsAOneLineError) {
  // A drafter made for another target (same sizes, other weights).
  RunResult other = run_cli("init-random --config " + dir_ + "/config.json --out " + dir_ + "/other --dtype f32 --seed 4");
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const DSparkConfig c = small_drafter_config();
  auto target = Transformer::load(dir_ + "/model");
  DSparkDrafter(c, TargetIdentity::of(*target), 1).save(dir_ + "/drafter");
  EXPECT_TRUE(is_one_line_error(run_cli("generate -m " + dir_ + "/other -d " + dir_ + "/drafter -p 'x' -n 4 -t 1")));
  // --gamma beyond the drafter's block size.
  RunResult gamma = run_cli("generate -m " + dir_ + "/model -d " + dir_ + "/drafter -p 'x' -n 4 --gamma 9 -t 1");
  EXPECT_TRUE(is_one_line_error(gamma)) << gamma.err;
  // A malformed prompts file.
  std::ofstream(dir_ + "/bad.jsonl") << "{\"prompt\": \"ok\"}\n{not json\n";
  RunResult bad = run_cli("bench -m " + dir_ + "/model --prompts " + dir_ + "/bad.jsonl -n 4 -t 1");
  EXPECT_TRUE(is_one_line_error(bad)) << bad.err;
  EXPECT_NE(bad.err.find("bad.jsonl:2"), std::string::npos) << bad.err;
  // A calibration file and an SPS profile made for other drafters / models.
  std::ofstream(dir_ + "/cal.json") << "{\"kind\": \"dspark-calibration\", \"drafter\": \"0123\", \"temperatures\": [1, 1, 1]}";
  EXPECT_TRUE(is_one_line_error(run_cli("generate -m " + dir_ + "/model -d " + dir_ + "/drafter -p 'x' -n 4 --verify sts --calibration " +
                                        dir_ + "/cal.json -t 1")));
  std::ofstream(dir_ + "/model/sps_profile.json") << "{\"kind\": \"dspark-sps-profile\", \"model\": \"other\", \"steps_per_second\": [1, 2, 3, 4]}";
  EXPECT_TRUE(is_one_line_error(run_cli("generate -m " + dir_ + "/model -d " + dir_ + "/drafter -p 'x' -n 4 --verify auto -t 1")));
  std::filesystem::remove(dir_ + "/model/sps_profile.json");
  // The same drafter on its own target works and reports tau.
  RunResult ok = run_cli("generate -m " + dir_ + "/model -d " + dir_ + "/drafter -p 'x' -n 6 --json -t 1");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"tau\""), std::string::npos);
}


// bench --verify fixed,threshold: every DSpark drafter once per mode, side by side, outputs equal
// to plain greedy decoding; an unknown mode is a one-line error.
TEST_F(CliTest, BenchRunsEachVerifyModeSideBySide) {
  const DSparkConfig c = small_drafter_config();
  auto target = Transformer::load(dir_ + "/model");
  DSparkDrafter(c, TargetIdentity::of(*target), 1).save(dir_ + "/bench-drafter");
  std::ofstream(dir_ + "/bench.jsonl") << "{\"prompt\": \"ab\"}\n{\"prompt\": \"cd\"}\n";
  const std::string base = "bench -m " + dir_ + "/model --prompts " + dir_ + "/bench.jsonl -d " + dir_ + "/bench-drafter -n 6 -t 1";
  RunResult r = run_cli(base + " --verify fixed,threshold --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto results = nlohmann::json::parse(r.out)["results"];
  ASSERT_EQ(results.size(), 3u);  // plain, then the drafter under each mode
  EXPECT_EQ(results[1]["verify"], "fixed");
  EXPECT_EQ(results[2]["verify"], "threshold");
  for (size_t i = 1; i < 3; ++i) EXPECT_TRUE(results[i]["outputs_match"].get<bool>());
  EXPECT_EQ(results[0]["steps_with_drafts"].get<int64_t>(), 0);  // plain decoding
  EXPECT_GT(results[1]["steps_with_drafts"].get<int64_t>(), 0);  // fixed verification drafts every step it can
  EXPECT_LE(results[1]["steps_with_drafts"].get<int64_t>(), results[1]["steps"].get<int64_t>());
  EXPECT_TRUE(is_one_line_error(run_cli(base + " --verify fixed,sideways")));

  // --rounds 2: the prompt set twice, each round's speedup beside the total's; outputs still equal.
  r = run_cli(base + " --verify fixed --rounds 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  results = nlohmann::json::parse(r.out)["results"];
  ASSERT_EQ(results.size(), 2u);
  for (const auto& result : results) ASSERT_EQ(result["speedup_per_round"].size(), 2u);
  EXPECT_EQ(results[0]["speedup_per_round"][0].get<double>(), 1.0);
  EXPECT_TRUE(results[1]["outputs_match"].get<bool>());
  EXPECT_TRUE(is_one_line_error(run_cli(base + " --rounds 0")));

  // --interleave step: the methods take turns by decoding step; the outputs do not change.
  r = run_cli(base + " --verify fixed,auto --interleave step --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto step_json = nlohmann::json::parse(r.out);
  EXPECT_EQ(step_json["interleave"], "step");
  results = step_json["results"];
  ASSERT_EQ(results.size(), 3u);
  for (const auto& result : results) {
    EXPECT_TRUE(result["outputs_match"].get<bool>());
    EXPECT_GT(result["tokens_per_second"].get<double>(), 0.0);
  }
  EXPECT_TRUE(is_one_line_error(run_cli(base + " --interleave prompt")));
}

}  // namespace
}  // namespace dspark
