// The decoder-only transformer (Qwen3 / Qwen2 / Llama / Gemma2 / Gemma3 / Gemma4 text) in LibTorch.
//
// One entry point advances any number of sequences at once ("ragged batching"): the tokens of all
// chunks are flattened into rows [N, H] for the dense layers, and attention runs per sequence
// against that sequence's own KV cache. A chunk of T tokens appends T positions to its cache; the
// caller truncates the cache to roll back rejected tokens.
#pragma once
#include <ATen/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/kv_cache.h"
#include "model/packed_weights.h"
#include "model/weights.h"

namespace dspark {

enum class LogitsAt { None, Last, All };

// One sequence's step: `tokens` are appended after the cache's current length.
struct SequenceChunk {
  KVCache* cache = nullptr;       // nullptr: a fresh sequence at position 0 with no cache kept
  std::vector<int64_t> tokens;    // T >= 1
  LogitsAt logits = LogitsAt::Last;
};

// Which hidden states to return for every position of every chunk.
struct HiddenTaps {
  // Layer l's output (0-based; HF's hidden_states[l + 1]). The drafter's context.
  std::vector<int64_t> layers;
  bool final_hidden = false;  // the final post-norm hidden (what the LM head reads)
};

struct ChunkOutput {
  at::Tensor logits;        // [n, V] float32; n = 0, 1 (last position) or T
  at::Tensor layer_hidden;  // [T, n_taps, H] in the model dtype (when taps.layers is not empty)
  at::Tensor final_hidden;  // [T, H] in the model dtype (when taps.final_hidden)
};

struct LoadOptions {
  std::string dtype;  // "" or "auto": float32 on CPU, as stored (torch_dtype) on GPU; else f32 / bf16 / f16
  std::string device = "cpu";
};

class Transformer {
 public:
  Transformer(ModelConfig config, ModelWeights weights, c10::Device device = c10::kCPU);
  static std::unique_ptr<Transformer> load(const std::string& dir, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  ModelWeights& weights() { return weights_; }
  c10::ScalarType dtype() const { return dtype_; }
  c10::Device device() const { return device_; }
  KVCache new_cache() const { return KVCache(config_, dtype_, device_); }

  // Advances every chunk; results are in chunk order.
  std::vector<ChunkOutput> forward(std::vector<SequenceChunk>& chunks, const HiddenTaps& taps = {});
  // One sequence.
  ChunkOutput forward(KVCache& cache, const std::vector<int64_t>& tokens,
                      LogitsAt logits = LogitsAt::Last, const HiddenTaps& taps = {});

  // Full sequences without a cache (training and scoring): tokens [B, T] int64 ->
  // logits [B, T, V] float32. Differentiable when the weights require grad.
  at::Tensor forward_full(const at::Tensor& tokens, const HiddenTaps& taps = {},
                          std::vector<at::Tensor>* layer_hidden = nullptr,
                          at::Tensor* final_hidden = nullptr);
  // The same without the LM head: final post-norm hidden states [B, T, H]. For callers that
  // need only hidden states (drafter training) or apply the head in row chunks (LM training).
  at::Tensor hidden_full(const at::Tensor& tokens, const HiddenTaps& taps = {},
                         std::vector<at::Tensor>* layer_hidden = nullptr);

  // The frozen head a drafter shares: token embedding (incl. Gemma's sqrt(H) scale) and
  // final-hidden -> logits (incl. final softcap). [N] -> [N, H]; [N, H] -> [N, V] float32.
  // `head_rows` [Vd, H]: rows of the LM head to use instead of all of it (a drafter's reduced
  // vocabulary) -> [N, Vd].
  at::Tensor embed(const at::Tensor& tokens) const;
  at::Tensor logits_from_final_hidden(const at::Tensor& hidden, const at::Tensor& head_rows = {}) const;
  // Whether decoding reads the weights from memory at every step (they exceed the last-level
  // cache): then whatever runs between two forwards, a drafter's weights too, is evicted as well.
  bool weights_streamed() const { return packed_.streamed(); }

 private:
  struct Segment;  // a chunk's rows and its cache, see transformer.cpp
  at::Tensor run_layers(const at::Tensor& tokens, at::Tensor x, const at::Tensor& positions,
                        std::vector<Segment>& segments, const HiddenTaps& taps, std::vector<at::Tensor>* tapped);
  at::Tensor per_layer_inputs(const at::Tensor& tokens, const at::Tensor& x) const;
  at::Tensor attention(int64_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       std::vector<Segment>& segments);

  ModelConfig config_;
  ModelWeights weights_;
  c10::Device device_;
  c10::ScalarType dtype_;
  at::Tensor inv_freq_global_, inv_freq_local_;  // [D/2] float32 (each kind's own D)
  std::vector<bool> kv_read_by_later_layers_;    // [L] Gemma4 KV sharing: a later layer attends to its k/v
  PackedWeights packed_;                          // the bf16 matrices, packed for decoding (CPU)
};

}  // namespace dspark
