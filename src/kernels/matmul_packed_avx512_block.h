// Internal to the two AVX-512 packed kernels (matmul_packed.cpp: AVX512-BF16 dot products;
// matmul_packed_avx512.cpp: widening FMAs): the parts of a block of MR rows x NP panels that do not
// depend on how the products are formed. always_inline, so each is compiled into its caller's
// target (an AVX512-BF16 function may inline these AVX-512F ones).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_packed_walk.h"

namespace dspark::kernels::detail {

#define DSPARK_AVX512_BLOCK_PART __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline

// Asks for k-pair q of the NP panels after the block's own (the thread's next block).
template <int NP>
DSPARK_AVX512_BLOCK_PART void prefetch_next_panels(const uint16_t* panel, int64_t panel_stride, int64_t q) {
#pragma GCC unroll 4
  for (int j = 0; j < NP; ++j)
    _mm_prefetch(reinterpret_cast<const char*>(panel + (j + NP) * panel_stride + q * 2 * kPackedPanel), _MM_HINT_T1);
}

// Writes acc[i][j] (16 columns each) to the first `cols` columns of y's rows [0, MR).
template <int MR, int NP>
DSPARK_AVX512_BLOCK_PART void store_block(const __m512 (&acc)[MR][NP], float* y, int64_t ldy, int64_t cols) {
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) {
      const int64_t c0 = j * kPackedPanel;
      if (c0 >= cols) break;
      const __mmask16 mask = cols - c0 >= kPackedPanel ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c0)) - 1);
      _mm512_mask_storeu_ps(y + i * ldy + c0, mask, acc[i][j]);
    }
}

#undef DSPARK_AVX512_BLOCK_PART

}  // namespace dspark::kernels::detail
