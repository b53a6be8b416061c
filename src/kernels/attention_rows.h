// Internal to kernels/attention*.cpp: the vectorised row kernels each ISA file provides.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/attention.h"

namespace dspark::kernels::detail {

// Query rows processed together: they share one kv head, so a block of keys (or values) is read
// from L2 once and from L1 for the other rows.
constexpr int64_t kAttentionRowTile = 16;
constexpr int64_t kAttentionMaxVectorDim = 256;

// Attention of heads [h0, h1) for all tokens. scratch: [kAttentionRowTile, (keys + 15) / 16 * 16].
using AttentionRowsFn = void (*)(const AttentionShape& shape, const float* q, const float* k, const float* v,
                                 int64_t kv_head_stride, float* out, int64_t h0, int64_t h1, float* scratch);

// One query row of a row tile: its q and output rows, its score buffer, its visible keys.
struct AttentionRow {
  const float* q;
  float* out;
  float* p;  // scores, then softmax weights
  int64_t first, last;
};

// Rows [r0, r0 + n) of the (token, head) rows of heads [g0, g1), which share one kv head (row r:
// token r / (g1 - g0), head g0 + r % (g1 - g0)); q, out: [T, heads, D]; row i's scores go to
// scratch + i * stride. Fills rows[0, n) and returns the keys the tile visits, [lo, hi], with lo
// rounded down to a multiple of the kernel's key block.
inline std::pair<int64_t, int64_t> fill_row_tile(const AttentionShape& a, const float* q, float* out, int64_t D,
                                                 float* scratch, int64_t stride, int64_t g0, int64_t g1, int64_t r0,
                                                 int64_t n, int64_t block, AttentionRow* rows) {
  int64_t lo = INT64_MAX, hi = -1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = (r0 + i) / (g1 - g0), h = g0 + (r0 + i) % (g1 - g0);
    AttentionRow& r = rows[i];
    r.last = std::min(a.keys - 1, a.position0 + t);
    r.first = a.window > 0 ? std::max<int64_t>(0, r.last - a.window + 1) : 0;
    r.q = q + (t * a.heads + h) * D;
    r.out = out + (t * a.heads + h) * D;
    r.p = scratch + i * stride;
    lo = std::min(lo, r.first / block * block);
    hi = std::max(hi, r.last);
  }
  return {lo, hi};
}

// The AVX2 + FMA kernel for head size D (a multiple of 8, at most 128, or 256), or nullptr.
AttentionRowsFn attention_rows_avx2(int64_t D);
// The generic path's inner loops, AVX2 + FMA.
float dot_avx2(const float* a, const float* b, int64_t n);
void axpy_avx2(float w, const float* x, float* y, int64_t n);

}  // namespace dspark::kernels::detail
