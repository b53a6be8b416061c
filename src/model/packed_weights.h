// bf16 weight matrices packed once for the decode kernel (kernels/matmul_packed.h).
//
// A model or drafter keeps a PackedWeights for the matrices it multiplies while decoding; while
// it is alive, dense() finds each one's packed copy by the tensor's data pointer and uses the
// packed kernel instead of the row-major one. The registry keeps a reference to every packed
// tensor's storage, so the address cannot be reused by another tensor while the entry exists, and
// it records the tensor's version counter: a matrix changed in place afterwards is not packed any
// more (dense() falls back to the row-major kernel).
//
// Packing costs a second copy of those matrices in memory; DSPARK_PACKED_WEIGHTS=0 turns it off
// (before/after comparisons). Only bf16 matrices on the CPU are packed, and only when the packed
// kernel has a path there (kernels::packed_bf16_isa(): AVX512-BF16 without AMX, whose tiles are
// faster still (kernels/matmul_amx.h), AVX-512F, or AVX2 + FMA).
#pragma once
#include <ATen/Tensor.h>

#include <vector>

namespace dspark {

namespace kernels { struct PackedBf16; }

class PackedWeights {
 public:
  PackedWeights() = default;
  // Packs every tensor of `matrices` that qualifies (2-D, contiguous, bf16, CPU); others are skipped.
  explicit PackedWeights(const std::vector<at::Tensor>& matrices);
  ~PackedWeights();
  PackedWeights(PackedWeights&& other) noexcept;
  PackedWeights& operator=(PackedWeights&& other) noexcept;
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  int64_t count() const { return int64_t(keys_.size()); }
  // Whether the packed matrices together exceed the last-level cache (each use reads them from
  // memory): their products prefetch ahead (kernels::PackedBf16::streamed).
  bool streamed() const { return streamed_; }

 private:
  void release();
  std::vector<const void*> keys_;
  bool streamed_ = false;
};

// Whether packing is on for this process (CPU support and DSPARK_PACKED_WEIGHTS).
bool packed_weights_enabled();

// The packed copy of w [n, k], or nullptr when it has none (not registered, or changed since).
const kernels::PackedBf16* find_packed(const at::Tensor& w);

}  // namespace dspark
