#include "support/tiny_models.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <random>
#include <unistd.h>

namespace dspark::testing {

std::vector<std::string> all_tiny_kinds() { return {"qwen3", "qwen2", "llama3", "gemma2", "gemma3", "gemma4"}; }

std::string tiny_config_json(const std::string& kind, int64_t vocab, int64_t sliding_window) {
  nlohmann::json j = {{"vocab_size", vocab},       {"hidden_size", 32},        {"intermediate_size", 48},
                      {"num_hidden_layers", 3},    {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"head_dim", 16},            {"max_position_embeddings", 256},
                      {"rms_norm_eps", 1e-6},      {"rope_theta", 10000.0},    {"initializer_range", 0.2},
                      {"eos_token_id", 1},         {"torch_dtype", "float32"}};
  if (kind == "qwen3") {
    j["architectures"] = {"Qwen3ForCausalLM"};
    j["tie_word_embeddings"] = true;
  } else if (kind == "qwen2") {
    j["architectures"] = {"Qwen2ForCausalLM"};
    j["tie_word_embeddings"] = false;
    j.erase("head_dim");  // hidden / heads = 8
  } else if (kind == "llama3") {
    j["architectures"] = {"LlamaForCausalLM"};
    j["tie_word_embeddings"] = false;
    j["rope_theta"] = 500000.0;
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  } else if (kind == "gemma2") {
    j["architectures"] = {"Gemma2ForCausalLM"};
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["query_pre_attn_scalar"] = 24;
    j["attn_logit_softcapping"] = 50.0;
    j["final_logit_softcapping"] = 30.0;
    j["sliding_window"] = sliding_window;
  } else if (kind == "gemma3") {
    j["architectures"] = {"Gemma3ForCausalLM"};
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["query_pre_attn_scalar"] = 16;
    j["sliding_window"] = sliding_window;
    j["sliding_window_pattern"] = 2;
    j["rope_local_base_freq"] = 10000.0;
    j["rope_theta"] = 1000000.0;
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  } else if (kind == "gemma4") {
    // Every Gemma-4 text feature: full layers with their own head dim and one KV head whose values
    // are the keys (k = v) under proportional RoPE, layers 2 and 3 reading the keys/values of
    // layers 0 and 1 (with double-wide MLPs), per-layer embeddings, a final softcap.
    j["architectures"] = {"Gemma4ForCausalLM"};
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["num_hidden_layers"] = 4;
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
    j["sliding_window"] = sliding_window;
    j["global_head_dim"] = 32;
    j["num_global_key_value_heads"] = 1;
    j["attention_k_eq_v"] = true;
    j["num_kv_shared_layers"] = 2;
    j["use_double_wide_mlp"] = true;
    j["hidden_size_per_layer_input"] = 8;
    j["vocab_size_per_layer_input"] = vocab;
    j["final_logit_softcapping"] = 30.0;
    j["rope_parameters"] = {
        {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}},
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  }
  return j.dump();
}

std::unique_ptr<Transformer> tiny_model(const std::string& kind, c10::ScalarType dtype, uint64_t seed) {
  ModelConfig config = parse_model_config(tiny_config_json(kind), kind);
  ModelWeights weights = random_weights(config, dtype, seed);
  if (config.gemma_norm || config.norm_scale_f32) {
    // Random (not identity) norm weights so that the (1 + w) or float32 w form is actually
    // exercised, and (Gemma4) layer scalars other than 1.
    const double identity = config.gemma_norm ? 0.0 : 1.0;
    for (auto& [name, t] : weights.named())
      if (t->dim() == 1 && (name.find("norm") != std::string::npos || name.find("layer_scalar") != std::string::npos))
        *t = (identity + torch::randn_like(t->to(torch::kFloat32)) * 0.3).to(dtype);
  }
  return std::make_unique<Transformer>(std::move(config), std::move(weights));
}

std::string temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("dspark-test-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

DSparkConfig tiny_drafter_config(int64_t block_size, MarkovKind markov, ContextMode context) {
  DSparkConfig c;
  c.block_size = block_size;
  c.width = 32;
  c.num_layers = 2;
  c.num_heads = 2;
  c.head_dim = 16;
  c.ffn_size = 48;
  c.markov = markov;
  c.markov_rank = 8;
  c.confidence = markov != MarkovKind::None;
  c.context = context;
  c.target_layers = {0, 1};
  c.init_std = 0.2;
  return c;
}

}  // namespace dspark::testing
