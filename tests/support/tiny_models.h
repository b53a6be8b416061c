// Tiny configs of every supported architecture, for tests that need a real forward pass.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace dspark::testing {

// Architecture names accepted: "qwen3", "qwen2", "llama3", "gemma2", "gemma3".
std::string tiny_config_json(const std::string& kind, int64_t vocab = 97, int64_t sliding_window = 5);
std::vector<std::string> all_tiny_kinds();
std::unique_ptr<Transformer> tiny_model(const std::string& kind, c10::ScalarType dtype, uint64_t seed = 1);
// A fresh unique temp directory (removed by the caller if it likes).
std::string temp_dir(const std::string& tag);

}  // namespace dspark::testing
