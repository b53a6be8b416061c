// The drafters shipped in models/ belong to the target beside them: each loads against it (the
// target identity in its dspark.json matches), its calibration files were fitted for it, and
// greedy speculative decoding with it equals plain decoding token for token on a Python prompt,
// with drafts accepted.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "drafter/dspark_drafter.h"
#include "model/transformer.h"
#include "spec/calibration.h"
#include "spec/dspark_source.h"
#include "support/greedy_lossless.h"
#include "tokenizer/tokenizer.h"

namespace dspark {
namespace {
namespace fs = std::filesystem;

const std::string kModels = std::string(DSPARK_SOURCE_DIR) + "/models/";

void expect_drafters_fit(const std::string& target_name, const std::vector<std::string>& drafter_names) {
  auto target = Transformer::load(kModels + target_name);
  const auto tokenizer = Tokenizer::load(kModels + target_name + "/tokenizer.json");
  const std::vector<TokenId> ids = tokenizer->encode("def count_words(text):\n    \"\"\"Return how many words text has.\"\"\"\n");
  const std::vector<int64_t> prompt(ids.begin(), ids.end());
  for (const std::string& name : drafter_names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(fs::exists(kModels + name + "/dspark.json"));
    std::shared_ptr<DSparkDrafter> drafter = DSparkDrafter::load(kModels + name, *target);
    if (drafter->config().confidence) {  // DFlash has no confidence head to calibrate
      const std::string greedy = kModels + name + "/" + kGreedyCalibrationFile;
      const std::string sampled = kModels + name + "/" + kSampledCalibrationFile;
      EXPECT_NO_THROW(load_calibration(greedy, drafter->calibration_fingerprint()));
      if (fs::exists(sampled)) {
        EXPECT_NO_THROW(load_calibration(sampled, drafter->calibration_fingerprint()));
      }
    }
    const testing::GreedyLossless r = testing::expect_greedy_equals_plain(
        *target, [&] { return std::make_unique<DSparkSource>(drafter, *target); }, prompt, 24, {3, 7});
    EXPECT_GT(r.checked, 0);
    EXPECT_GT(r.accepted, 0);
  }
}

TEST(ShippedDrafters, DefaultTargetDraftersFitIt) {
  expect_drafters_fit("default", {"default-dspark", "default-dspark-sampled", "default-dflash"});
}

TEST(ShippedDrafters, SmallTargetDraftersFitIt) {
  expect_drafters_fit("default-small", {"default-small-dspark", "default-small-dflash"});
}

}  // namespace
}  // namespace dspark
