#include "model/model_dir.h"

#include <filesystem>

#include "io/atomic_file.h"

namespace dspark {

void write_model_dir(const std::string& dir, nlohmann::json config_json, ModelWeights& weights,
                     c10::ScalarType dtype, size_t max_shard_bytes) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  config_json["torch_dtype"] = dtype_to_hf(dtype);
  nlohmann::json generation = {{"do_sample", false}};
  if (config_json.contains("bos_token_id")) generation["bos_token_id"] = config_json["bos_token_id"];
  if (config_json.contains("eos_token_id")) generation["eos_token_id"] = config_json["eos_token_id"];
  // Weights first: a reader that sees the new config.json also sees matching weights.
  save_weights(weights, dir, dtype, max_shard_bytes);
  io::write_text_atomic((fs::path(dir) / "generation_config.json").string(), generation.dump(2) + "\n");
  io::write_text_atomic((fs::path(dir) / "config.json").string(), config_json.dump(2) + "\n");
}

}  // namespace dspark
