#include "support/train_log.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace dspark::testing {

std::vector<double> logged_losses(const std::string& out_dir) {
  std::ifstream in(out_dir + "/train/log.jsonl");
  std::vector<double> losses;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) losses.push_back(j["loss"].get<double>());
  }
  return losses;
}

}  // namespace dspark::testing
