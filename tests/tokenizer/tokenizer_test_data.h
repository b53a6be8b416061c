// Locating the tokenizer test data. The expected vectors (tests/data/tokenizer/*.json) are in the
// repository; the tokenizer files they were made from are fetched by scripts/fetch-test-data.sh
// (called by scripts/setup.sh). A missing fetch is a test failure, never a silent skip.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dspark::test {

inline std::filesystem::path source_dir() { return DSPARK_SOURCE_DIR; }

inline std::string missing_data_message(const std::filesystem::path& path) {
  return "tokenizer test data missing: " + path.string() +
         " does not exist. Run scripts/setup.sh (or scripts/fetch-test-data.sh) to fetch it.";
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

}  // namespace dspark::test
