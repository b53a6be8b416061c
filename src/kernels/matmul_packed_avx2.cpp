// Packed-panel bf16 decode products on AVX2 + FMA (CPUs without AVX512-BF16; see matmul_packed.h).
//
// Same panel layout as the AVX512-BF16 kernel: one 64-byte step of a panel holds k-pair q of its
// 16 weight rows, [16, 2] bf16. Here each 32-byte half (8 rows) is widened in registers: shifting
// every 32-bit lane left by 16 gives the even-k weights as float32, masking off the low 16 bits
// gives the odd-k weights. Both are multiplied by broadcast x values (float32, exact: no rounding
// of x to bf16) into 8 output lanes, so there are no horizontal sums and no widened copy of the
// weights in memory (the row-major AVX2 path widens each block of weight rows into an L1 buffer
// first, and its passes over 4 x rows wait for that store stream).
//
// Numerics: output j of row i is the float32 chain acc = fma(x[i, p], w[j, p], acc) for
// p = 0, 1, ..., k - 1 (padding adds exact zeros), whatever m, the block shape or the thread
// count: each row's result is the same whatever else is in the batch (model/ops.h
// RowInvariantScope). Bound for x holding bf16 values: |y - exact| <= k u S, as the other paths.
//
// Work: as the AVX512-BF16 kernel, a thread takes a contiguous run of 4-panel groups (64 output
// columns, one linear stream); every pass of up to 4 x rows reads the group (4 * kp * 32 bytes)
// from memory once and from L2 after. Blocks: 1 row x 4 panels, 2 rows x 2 panels (interleaved
// order: 8 accumulators, each weight half widened right before its FMAs) and 3-4 rows x 1 panel
// (the panel's four widened halves in registers, then each row's broadcasts).
#include "kernels/matmul_packed_avx2.h"

#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_packed_walk.h"

namespace dspark::kernels::detail {
namespace {

#define DSPARK_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kPanel = kPackedPanel;  // output rows per panel
constexpr int kMaxPassRows = 4;           // x rows per pass

DSPARK_AVX2 inline __m256 even_weights(__m256i pairs) { return _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16)); }
DSPARK_AVX2 inline __m256 odd_weights(__m256i pairs, __m256i high) {
  return _mm256_castsi256_ps(_mm256_and_si256(pairs, high));
}

// Half h (8 weight rows) of k-pair q in the panels from `panel` on: [8, 2] bf16 as 8 x 32 bits.
DSPARK_AVX2 inline __m256i load_half(const uint16_t* panel, int64_t panel_stride, int64_t q, int h) {
  return _mm256_loadu_si256(
      reinterpret_cast<const __m256i*>(panel + (h / 2) * panel_stride + q * 2 * kPanel + (h % 2) * 8 * 2));
}

// Rows [0, MR) of x (float32, k-pair q at x + 2q; `ldx` floats per row) against NP consecutive
// panels; writes the first `cols` (<= NP * 16) output columns of each row. With Prefetch, each
// step also asks for the same k-pair of the panels NP further on (the thread's next block).
template <int MR, int NP, bool Prefetch>
DSPARK_AVX2 void packed_block(const float* x, int64_t ldx, int64_t pairs, const uint16_t* panel, int64_t panel_stride,
                              float* y, int64_t ldy, int64_t cols) {
  constexpr int H = 2 * NP;  // 8-lane halves
  __m256 acc[MR][H];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) acc[i][h] = _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(int(0xFFFF0000u));
  for (int64_t q = 0; q < pairs; ++q) {
    if constexpr (Prefetch) {
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(panel + (j + NP) * panel_stride + q * 2 * kPanel), _MM_HINT_T1);
    }
    if constexpr (MR <= 2) {
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) {
        const __m256i w = load_half(panel, panel_stride, q, h);
        const __m256 we = even_weights(w), wo = odd_weights(w, high);
#pragma GCC unroll 2
        for (int i = 0; i < MR; ++i) {
          acc[i][h] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + i * ldx + 2 * q), we, acc[i][h]);
          acc[i][h] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + i * ldx + 2 * q + 1), wo, acc[i][h]);
        }
      }
    } else {
      __m256 we[H], wo[H];
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const __m256i w = load_half(panel, panel_stride, q, h);
        we[h] = even_weights(w);
        wo[h] = odd_weights(w, high);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m256 xe = _mm256_broadcast_ss(x + i * ldx + 2 * q);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) acc[i][h] = _mm256_fmadd_ps(xe, we[h], acc[i][h]);
        const __m256 xo = _mm256_broadcast_ss(x + i * ldx + 2 * q + 1);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) acc[i][h] = _mm256_fmadd_ps(xo, wo[h], acc[i][h]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const int64_t c0 = h * 8;
      if (c0 >= cols) break;
      if (cols - c0 >= 8) {
        _mm256_storeu_ps(y + i * ldy + c0, acc[i][h]);
      } else {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, acc[i][h]);
        std::copy(lanes, lanes + (cols - c0), y + i * ldy + c0);
      }
    }
}

using Blocks = PackedBlocks<float, kMaxPassRows>;

// [rows - 1]: 1 row x 4 panels, 2 rows x 2 panels, 3-4 rows x 1 panel.
template <bool Prefetch>
const Blocks& blocks() {
  static const Blocks b = {
      {&packed_block<1, 4, Prefetch>, &packed_block<2, 2, Prefetch>, &packed_block<3, 1, Prefetch>,
       &packed_block<4, 1, Prefetch>},
      {4, 2, 1, 1},
      {&packed_block<1, 1, Prefetch>, &packed_block<2, 1, Prefetch>, &packed_block<3, 1, Prefetch>,
       &packed_block<4, 1, Prefetch>},
  };
  return b;
}

}  // namespace

void matmul_bf16_packed_avx2(const float* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y, int64_t ldy) {
  const auto [rows, stride] = float_rows_of_even_length(x, ldx, m, w);
  // Only a group's first pass prefetches: later passes find the group in cache.
  walk_packed_groups(rows, stride, m, w, y, ldy, w.streamed ? blocks<true>() : blocks<false>(), blocks<false>());
}

}  // namespace dspark::kernels::detail
