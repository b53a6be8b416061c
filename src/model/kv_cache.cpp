#include "model/kv_cache.h"

#include <torch/torch.h>

#include "util/error.h"

namespace dspark {

KVCache::KVCache(const ModelConfig& config, c10::ScalarType dtype, c10::Device device)
    : k_(config.num_layers), v_(config.num_layers), n_kv_(config.num_kv_heads),
      head_dim_(config.head_dim), dtype_(dtype), device_(device) {}

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
    at::Tensor k = torch::empty({n_kv_, grown, head_dim_}, opts);
    at::Tensor v = torch::empty({n_kv_, grown, head_dim_}, opts);
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
  const int64_t T = k.size(0);
  // [T, n_kv, D] -> [n_kv, T, D]
  k_[layer].narrow(1, length_, T).copy_(k.transpose(0, 1));
  v_[layer].narrow(1, length_, T).copy_(v.transpose(0, 1));
}

at::Tensor KVCache::keys(int64_t layer, int64_t pending) const {
  return k_[layer].narrow(1, 0, length_ + pending);
}

at::Tensor KVCache::values(int64_t layer, int64_t pending) const {
  return v_[layer].narrow(1, 0, length_ + pending);
}

}  // namespace dspark
