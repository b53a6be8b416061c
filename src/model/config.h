// ModelConfig: everything the forward pass needs, read from a Hugging Face config.json.
// A plain struct (as gemma.cpp does): the model code branches on its fields, never on names.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dspark {

enum class Architecture { Qwen3, Qwen2, Llama, Gemma2, Gemma3, Gemma4 };
enum class Activation { SiLU, GeluTanh };

// rope_scaling as HF writes it. `type` is "none", "linear", "llama3" or "proportional" (Gemma4:
// only the first partial_rotary_factor * D/2 frequencies rotate, the rest are 0, all / factor).
struct RopeScaling {
  std::string type = "none";
  double factor = 1.0;
  double partial_rotary_factor = 1.0;
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
  RopeScaling rope_scaling;           // global layers (and, outside Gemma3/4, sliding layers too)
  RopeScaling rope_local_scaling;     // sliding-window layers

  bool tie_word_embeddings = false;
  bool qkv_bias = false;         // Qwen2, or attention_bias = true
  bool o_bias = false;           // attention_bias = true outside Qwen2 (HF biases o_proj too)
  bool qk_norm = false;          // Qwen3, Gemma3: RMSNorm over head_dim on q and k before RoPE
  bool gemma_norm = false;       // RMSNorm scales by (1 + w) instead of w
  bool norm_scale_f32 = false;   // Gemma4: RMSNorm multiplies by w in float32 before the cast back
  bool scale_embeddings = false; // Gemma: embeddings * sqrt(hidden_size)
  bool sandwich_norm = false;    // Gemma2/3: post-attention and pre/post-feedforward norms
  Activation activation = Activation::SiLU;
  double attn_scale = 0.0;       // multiplier of q.k: 1/sqrt(query_pre_attn_scalar or head_dim)
  std::optional<double> attn_softcap;   // Gemma2: tanh soft cap on attention scores
  std::optional<double> final_softcap;  // Gemma2: tanh soft cap on logits

  int64_t sliding_window = 0;           // 0: no sliding-window layers
  std::vector<bool> layer_is_sliding;   // [num_layers]

  // Per-layer geometry. Empty: every layer has head_dim, num_kv_heads, intermediate_size and its
  // own keys/values (all architectures but Gemma4, and hand-made configs).
  std::vector<int64_t> layer_head_dim;      // [num_layers] Gemma4: global_head_dim on full layers
  std::vector<int64_t> layer_kv_heads;      // [num_layers] Gemma4: num_global_key_value_heads
  std::vector<int64_t> layer_intermediate;  // [num_layers] Gemma4: x2 on KV-shared layers (double-wide MLP)
  std::vector<int64_t> layer_kv_source;     // [num_layers] the layer whose keys/values a layer attends
                                            // to: itself, or (Gemma4 KV sharing) an earlier layer
  // Gemma4 attention: values through a scale-free RMSNorm; on full-attention layers with
  // attention_k_eq_v the values are the (un-normed) key projection, there is no v_proj.
  bool v_norm = false;
  bool k_eq_v = false;
  // Gemma4 per-layer embeddings (PLE): a [per_layer_vocab, L * per_layer_size] table and a
  // projection of the embeddings give every layer a [per_layer_size] input, gated into its output.
  int64_t per_layer_size = 0;  // hidden_size_per_layer_input; 0: none
  int64_t per_layer_vocab = 0;
  bool layer_scalar = false;   // Gemma4: each layer's output times a stored scalar

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype = "float32";  // dtype the checkpoint was saved in

  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t head_dim_at(int64_t layer) const { return layer_head_dim.empty() ? head_dim : layer_head_dim[size_t(layer)]; }
  int64_t kv_heads_at(int64_t layer) const { return layer_kv_heads.empty() ? num_kv_heads : layer_kv_heads[size_t(layer)]; }
  int64_t intermediate_at(int64_t layer) const {
    return layer_intermediate.empty() ? intermediate_size : layer_intermediate[size_t(layer)];
  }
  int64_t kv_source(int64_t layer) const { return layer_kv_source.empty() ? layer : layer_kv_source[size_t(layer)]; }
  bool kv_shared(int64_t layer) const { return kv_source(layer) != layer; }
  // Values are the key projection on this layer (no v_proj).
  bool values_from_keys(int64_t layer) const { return k_eq_v && !layer_is_sliding[size_t(layer)]; }
  // Head dim of the sliding-window / the full-attention layers (each kind shares one RoPE).
  int64_t head_dim_of_kind(bool sliding) const;
  int64_t parameter_count() const;
};

// Parses a config.json text; `source` names the file for error messages. Unsupported
// architectures and missing/invalid fields throw dspark::Error.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig load_model_config(const std::string& path);  // a directory or a config.json path
const char* architecture_name(Architecture arch);

}  // namespace dspark
