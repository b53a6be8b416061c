// --device on every model command: an unusable device is refused with one line and exit code 1
// before anything is loaded (a CPU-only build, or no GPU visible). On a machine where CUDA works
// the refusal tests are skipped; scripts/gpu-check.sh checks the GPU runs there.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/device.h"
#include "support/run_cli.h"
#include "support/tiny_models.h"

namespace dspark {
namespace {

using testing::is_one_line_error;
using testing::run_cli;
using testing::RunResult;

class DeviceCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::temp_dir("device-cli");
    std::ofstream(dir_ + "/config.json") << testing::tiny_config_json("qwen3", 300);
    RunResult r = run_cli("init-random --config " + dir_ + "/config.json --out " + dir_ + "/model --dtype f32 --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static std::string dir_;
};
std::string DeviceCliTest::dir_;

TEST_F(DeviceCliTest, UnknownDeviceIsAOneLineError) {
  RunResult r = run_cli("generate -m " + dir_ + "/model -p hi -n 2 --device tpu");
  EXPECT_TRUE(is_one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("unknown device 'tpu'"), std::string::npos) << r.err;
}

TEST_F(DeviceCliTest, AGpuThatIsNotThereIsAOneLineError) {
  // No machine has 1000 GPUs: refused by every build, with or without CUDA.
  RunResult r = run_cli("generate -m " + dir_ + "/model -p hi -n 2 --device cuda:999");
  EXPECT_TRUE(is_one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("--device cuda:999"), std::string::npos) << r.err;
}

TEST_F(DeviceCliTest, EveryModelCommandRefusesCudaWithoutAGpu) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA GPU is usable here";
  const std::string m = dir_ + "/model", none = dir_ + "/absent";
  // Required arguments only; the device check comes before any of the files is read.
  const std::vector<std::string> commands = {
      "generate -m " + m + " -p hi",
      "bench -m " + m + " --prompts " + none,
      "profile -m " + m + " --no-save",
      "serve -m " + m + " --port 1",
      "bench-serve -m " + m + " -d " + none + " --prompts " + none,
      "calibrate -m " + m + " -d " + none + " --prompts " + none + " --out " + none,
      "perplexity -m " + m + " -f " + none,
      "regen --target " + m + " --prompts " + none + " --out " + none,
      "train --target " + m + " --data " + none + " --out " + none,
      "train-lm --config " + dir_ + "/config.json --tokenizer " + m + " --corpus " + none + " --out " + none + " --steps 1",
  };
  for (const std::string& command : commands) {
    RunResult r = run_cli(command + " --device cuda");
    EXPECT_TRUE(is_one_line_error(r)) << command << "\n" << r.err;
    EXPECT_NE(r.err.find("--device cuda:"), std::string::npos) << command << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(none)) << command << " wrote " << none;
  }
}

}  // namespace
}  // namespace dspark
