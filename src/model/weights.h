// The target model's parameters by Hugging Face tensor names, as LibTorch tensors.
// Loaded zero-copy from mmap'd safetensors when the file dtype is the compute dtype.
#pragma once
#include <ATen/Tensor.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "model/config.h"

namespace dspark {

// Shapes with this layer's D, nkv and F (ModelConfig::head_dim_at etc.).
struct LayerWeights {
  at::Tensor input_norm;            // [H]
  at::Tensor q_proj, k_proj, v_proj;  // [nh*D, H], [nkv*D, H], [nkv*D, H]; Gemma4: no k/v on KV-shared
                                      // layers, no v with attention_k_eq_v on full layers
  at::Tensor q_bias, k_bias, v_bias;  // Qwen2, or attention_bias = true
  at::Tensor q_norm, k_norm;          // [D] (Qwen3, Gemma3)
  at::Tensor o_proj;                  // [H, nh*D]
  at::Tensor o_bias;                  // [H] (attention_bias = true outside Qwen2)
  at::Tensor post_attn_norm;          // [H]: Llama/Qwen pre-MLP norm; Gemma post-attention norm
  at::Tensor pre_ffn_norm, post_ffn_norm;  // [H] (Gemma sandwich)
  at::Tensor gate_proj, up_proj;      // [F, H]
  at::Tensor down_proj;               // [H, F]
  // Gemma4 per-layer input: gate [P, H], projection [H, P], norm [H]; output scalar [1].
  at::Tensor per_layer_gate, per_layer_proj, post_per_layer_norm;
  at::Tensor layer_scalar;
};

struct ModelWeights {
  at::Tensor embed;    // [V, H]
  std::vector<LayerWeights> layers;
  at::Tensor final_norm;  // [H]
  at::Tensor lm_head;     // [V, H]; the same tensor as `embed` when tied
  // Gemma4 per-layer embeddings: table [Vp, L*P], projection of the embeddings [L*P, H], norm [P].
  at::Tensor embed_per_layer, per_layer_model_proj, per_layer_proj_norm;

  // (HF name, tensor) for every stored (defined) parameter; the tied lm_head is listed once (as embed).
  std::vector<std::pair<std::string, at::Tensor*>> named();
};

// Loads weights from a checkpoint directory (model.safetensors or a sharded index), converting to
// `dtype`. c10::ScalarType::Undefined loads "mixed": matrices stored as bf16 stay bf16 (memory
// mapped), all other tensors become float32 (CPU decoding: float32 activations, half the bytes). Missing tensors and shape mismatches throw dspark::Error naming the tensor and file.
ModelWeights load_weights(const ModelConfig& config, const std::string& dir, c10::ScalarType dtype);

// Random weights (normal(0, initializer_range), norms at their identity value) for tests and
// speed benchmarks.
ModelWeights random_weights(const ModelConfig& config, c10::ScalarType dtype, uint64_t seed);

// Writes the weights in HF layout (`dir/model.safetensors` or shards) in `dtype`, atomically.
void save_weights(ModelWeights& weights, const std::string& dir, c10::ScalarType dtype,
                  size_t max_shard_bytes = 0);

// "float32" | "bfloat16" | "float16" (and the short forms f32, bf16, f16) -> ScalarType.
c10::ScalarType parse_dtype(const std::string& name);
std::string dtype_to_hf(c10::ScalarType dtype);  // "float32", "bfloat16", "float16"

}  // namespace dspark
