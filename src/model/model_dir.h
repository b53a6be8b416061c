// Writes a model directory in Hugging Face layout: config.json (with torch_dtype set to the saved
// dtype), generation_config.json and model.safetensors (or shards). The tokenizer is the caller's.
#pragma once
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <string>

#include "model/weights.h"

namespace dspark {

void write_model_dir(const std::string& dir, nlohmann::json config_json, ModelWeights& weights,
                     c10::ScalarType dtype, size_t max_shard_bytes = 0);

}  // namespace dspark
