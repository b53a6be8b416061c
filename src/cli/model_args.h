// Loading a model directory (weights + tokenizer) the way every command does it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace dspark::cli {

struct LoadedModel {
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int64_t> eos_ids;  // from config.json, generation_config.json and the tokenizer
};

LoadedModel load_model_dir(const std::string& dir, const RuntimeArgs& runtime);

// The prompt text from -p or -f (exactly one must be given).
std::string read_prompt(const std::string& text, const std::string& file);

// Makes LibTorch's multi-line messages fit on one line.
std::string one_line(const std::string& message);

}  // namespace dspark::cli
