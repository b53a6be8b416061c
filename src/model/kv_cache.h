// Per-sequence KV cache. Keys/values of every layer live in [n_kv_heads, capacity, head_dim]
// buffers that grow by doubling; `length()` positions are valid. Sliding-window layers keep their
// full history too and are masked to the window at attention time, so truncating back to any
// length (rollback after rejected drafts) is exact for every layer type. Layers that share another
// layer's keys/values (Gemma4 KV sharing) have no buffers: keys()/values() of such a layer are
// those of its source layer, so truncation rolls them back together.
#pragma once
#include <ATen/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Device.h>

#include <vector>

#include "model/config.h"

namespace dspark {

class KVCache {
 public:
  KVCache(const ModelConfig& config, c10::ScalarType dtype, c10::Device device = c10::kCPU);

  int64_t length() const { return length_; }
  // Forgets every position >= new_length (no-op if already shorter).
  void truncate(int64_t new_length);
  void clear() { length_ = 0; }

  // Used by the forward pass: make room for `extra` more positions, write a layer's keys/values
  // for positions [length, length + T) ([T, n_kv, D] each), then commit the new length once all
  // layers are written.
  void reserve(int64_t extra);
  void write(int64_t layer, const at::Tensor& k, const at::Tensor& v);
  void commit(int64_t chunk_length) { length_ += chunk_length; }
  // Keys/values of positions [0, length + pending): [n_kv, S, D] (the source layer's for a shared one).
  at::Tensor keys(int64_t layer, int64_t pending) const;
  at::Tensor values(int64_t layer, int64_t pending) const;

 private:
  std::vector<at::Tensor> k_, v_;  // per layer [n_kv(l), capacity, D(l)]; undefined for shared layers
  std::vector<int64_t> source_;    // per layer: the layer whose buffers it reads
  std::vector<int64_t> n_kv_, head_dim_;
  int64_t length_ = 0;
  int64_t capacity_ = 0;
  c10::ScalarType dtype_;
  c10::Device device_;
};

}  // namespace dspark
