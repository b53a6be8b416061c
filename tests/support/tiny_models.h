// Tiny configs of every supported architecture, for tests that need a real forward pass.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "drafter/dspark_config.h"
#include "model/transformer.h"

namespace dspark::testing {

// Architecture names accepted: "qwen3", "qwen2", "llama3", "gemma2", "gemma3", "gemma4".
std::string tiny_config_json(const std::string& kind, int64_t vocab = 97, int64_t sliding_window = 5);
std::vector<std::string> all_tiny_kinds();
std::unique_ptr<Transformer> tiny_model(const std::string& kind, c10::ScalarType dtype, uint64_t seed = 1);
// A small drafter for the tiny targets (2 layers, width 32, rank 8, context from layers 0 and 1;
// confidence head with any Markov head); init_std 0.2 so that every part visibly matters.
DSparkConfig tiny_drafter_config(int64_t block_size = 4, MarkovKind markov = MarkovKind::Vanilla,
                                 ContextMode context = ContextMode::Layers);
// A fresh unique temp directory (removed by the caller if it likes).
std::string temp_dir(const std::string& tag);

}  // namespace dspark::testing
