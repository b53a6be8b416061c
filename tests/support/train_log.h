// Reading a training run's log (OUT/train/log.jsonl) in tests.
#pragma once
#include <string>
#include <vector>

namespace dspark::testing {

// The "loss" of every log line that has one, in order.
std::vector<double> logged_losses(const std::string& out_dir);

}  // namespace dspark::testing
