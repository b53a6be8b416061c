#include "model/kv_cache.h"

#include <torch/torch.h>

#include <cstring>

#include "util/error.h"

namespace dspark {

KVCache::KVCache(const ModelConfig& config, c10::ScalarType dtype, c10::Device device)
    : k_(config.num_layers), v_(config.num_layers), dtype_(dtype), device_(device) {
  for (int64_t l = 0; l < config.num_layers; ++l) {
    source_.push_back(config.kv_source(l));
    n_kv_.push_back(config.kv_heads_at(l));
    head_dim_.push_back(config.head_dim_at(l));
  }
}

void KVCache::truncate(int64_t new_length) {
  if (new_length < 0) fail("KV cache: cannot truncate to a negative length ({})", new_length);
  length_ = std::min(length_, new_length);
}

void KVCache::reserve(int64_t extra) {
  const int64_t need = length_ + extra;
  if (need <= capacity_) return;
  int64_t grown = std::max<int64_t>(64, capacity_);
  while (grown < need) grown *= 2;
  auto opts = torch::TensorOptions().dtype(dtype_).device(device_);
  for (size_t l = 0; l < k_.size(); ++l) {
    if (source_[l] != int64_t(l)) continue;  // shared: reads its source layer's buffers
    at::Tensor k = torch::empty({n_kv_[l], grown, head_dim_[l]}, opts);
    at::Tensor v = torch::empty({n_kv_[l], grown, head_dim_[l]}, opts);
    if (length_ > 0) {
      k.narrow(1, 0, length_).copy_(k_[l].narrow(1, 0, length_));
      v.narrow(1, 0, length_).copy_(v_[l].narrow(1, 0, length_));
    }
    k_[l] = k;
    v_[l] = v;
  }
  capacity_ = grown;
}

void KVCache::write(int64_t layer, const at::Tensor& k, const at::Tensor& v) {
  if (source_[size_t(layer)] != layer) fail("KV cache: layer {} shares layer {}'s keys/values and writes none", layer, source_[size_t(layer)]);
  const int64_t T = k.size(0);
  at::Tensor& kb = k_[size_t(layer)];
  at::Tensor& vb = v_[size_t(layer)];
  // Decoding on the CPU: row copies. Two copy_ calls through LibTorch (a transposed view each)
  // cost about 5 us of dispatch per layer and tensor, ~0.1 ms of a 3 ms decoding step of the
  // default target, for a few hundred bytes.
  const bool rows = k.device().is_cpu() && k.dim() == 3 && v.dim() == 3 && k.scalar_type() == dtype_ &&
                    v.scalar_type() == dtype_ && k.stride(2) == 1 && v.stride(2) == 1 && k.sizes() == v.sizes() &&
                    k.size(1) == kb.size(0) && k.size(2) == kb.size(2) && kb.is_contiguous() && vb.is_contiguous();
  if (rows) {
    const int64_t n_kv = k.size(1), D = k.size(2), cap = kb.size(1), bytes = D * kb.element_size();
    auto* kd = static_cast<char*>(kb.data_ptr());
    auto* vd = static_cast<char*>(vb.data_ptr());
    const auto* ks = static_cast<const char*>(k.data_ptr());
    const auto* vs = static_cast<const char*>(v.data_ptr());
    const int64_t es = kb.element_size();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < n_kv; ++h) {
        const int64_t dst = ((h * cap) + length_ + t) * D * es;
        std::memcpy(kd + dst, ks + (t * k.stride(0) + h * k.stride(1)) * es, size_t(bytes));
        std::memcpy(vd + dst, vs + (t * v.stride(0) + h * v.stride(1)) * es, size_t(bytes));
      }
    return;
  }
  // [T, n_kv, D] -> [n_kv, T, D]
  kb.narrow(1, length_, T).copy_(k.transpose(0, 1));
  vb.narrow(1, length_, T).copy_(v.transpose(0, 1));
}

at::Tensor KVCache::keys(int64_t layer, int64_t pending) const {
  return k_[size_t(source_[size_t(layer)])].narrow(1, 0, length_ + pending);
}

at::Tensor KVCache::values(int64_t layer, int64_t pending) const {
  return v_[size_t(source_[size_t(layer)])].narrow(1, 0, length_ + pending);
}

}  // namespace dspark
