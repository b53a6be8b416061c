// ModelConfig: everything the forward pass needs, read from a Hugging Face config.json.
// A plain struct (as gemma.cpp does): the model code branches on its fields, never on names.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dspark {

enum class Architecture { Qwen3, Qwen2, Llama, Gemma2, Gemma3 };
enum class Activation { SiLU, GeluTanh };

// rope_scaling as HF writes it. `type` is "none", "linear" or "llama3".
struct RopeScaling {
  std::string type = "none";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture arch = Architecture::Qwen3;
  std::string architecture_name;  // as written in config.json, e.g. "Qwen3ForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;

  double rope_theta = 10000.0;        // global (full-attention) layers
  double rope_local_theta = 10000.0;  // sliding-window layers (Gemma3's rope_local_base_freq)
  RopeScaling rope_scaling;           // all layers; Gemma3: global layers only

  bool tie_word_embeddings = false;
  bool qkv_bias = false;         // Qwen2, or attention_bias = true
  bool o_bias = false;           // attention_bias = true outside Qwen2 (HF biases o_proj too)
  bool qk_norm = false;          // Qwen3, Gemma3: RMSNorm over head_dim on q and k before RoPE
  bool gemma_norm = false;       // RMSNorm scales by (1 + w) instead of w
  bool scale_embeddings = false; // Gemma: embeddings * sqrt(hidden_size)
  bool sandwich_norm = false;    // Gemma2/3: post-attention and pre/post-feedforward norms
  Activation activation = Activation::SiLU;
  double attn_scale = 0.0;       // multiplier of q.k: 1/sqrt(query_pre_attn_scalar or head_dim)
  std::optional<double> attn_softcap;   // Gemma2: tanh soft cap on attention scores
  std::optional<double> final_softcap;  // Gemma2: tanh soft cap on logits

  int64_t sliding_window = 0;           // 0: no sliding-window layers
  std::vector<bool> layer_is_sliding;   // [num_layers]

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype = "float32";  // dtype the checkpoint was saved in

  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t parameter_count() const;
};

// Parses a config.json text; `source` names the file for error messages. Unsupported
// architectures and missing/invalid fields throw dspark::Error.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig load_model_config(const std::string& path);  // a directory or a config.json path
const char* architecture_name(Architecture arch);

}  // namespace dspark
