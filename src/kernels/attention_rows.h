// Internal to kernels/attention*.cpp: the vectorised row kernels each ISA file provides.
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace dspark::kernels::detail {

// Query rows processed together: they share one kv head, so a block of keys (or values) is read
// from L2 once and from L1 for the other rows.
constexpr int64_t kAttentionRowTile = 16;
constexpr int64_t kAttentionMaxVectorDim = 256;

// Attention of heads [h0, h1) for all tokens. scratch: [kAttentionRowTile, (keys + 15) / 16 * 16].
using AttentionRowsFn = void (*)(const AttentionShape& shape, const float* q, const float* k, const float* v,
                                 int64_t kv_head_stride, float* out, int64_t h0, int64_t h1, float* scratch);

// The AVX2 + FMA kernel for head size D (a multiple of 8, at most 128, or 256), or nullptr.
AttentionRowsFn attention_rows_avx2(int64_t D);
// The generic path's inner loops, AVX2 + FMA.
float dot_avx2(const float* a, const float* b, int64_t n);
void axpy_avx2(float w, const float* x, float* y, int64_t n);

}  // namespace dspark::kernels::detail
