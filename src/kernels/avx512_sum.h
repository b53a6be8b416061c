// Horizontal sum (and maximum) of 16 float lanes, shared by the AVX-512 kernels (matmul, attention,
// bandwidth, softmax).
// Written with GCC vector shuffles: GCC 12's _mm512_reduce_add_ps and the shuffle intrinsics it is
// built from trip -Wuninitialized (their _mm512_undefined_ps operand).
#pragma once

#include <immintrin.h>

namespace dspark::kernels {

__attribute__((target("avx512f"))) inline float avx512_sum(__m512 v) {
  using Index = int __attribute__((vector_size(64)));
  v += __builtin_shuffle(v, Index{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
  v += __builtin_shuffle(v, Index{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
  v += __builtin_shuffle(v, Index{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
  v += __builtin_shuffle(v, Index{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});
  return v[0];
}

// Largest of 16 float lanes (NaN-free lanes; the same shuffles).
__attribute__((target("avx512f"))) inline float avx512_max(__m512 v) {
  using Index = int __attribute__((vector_size(64)));
  const __mmask16 all = 0xFFFF;  // masked max: GCC 12's unmasked form trips -Wmaybe-uninitialized
  v = _mm512_mask_max_ps(v, all, v, __m512(__builtin_shuffle(v, Index{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7})));
  v = _mm512_mask_max_ps(v, all, v, __m512(__builtin_shuffle(v, Index{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11})));
  v = _mm512_mask_max_ps(v, all, v, __m512(__builtin_shuffle(v, Index{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13})));
  v = _mm512_mask_max_ps(v, all, v, __m512(__builtin_shuffle(v, Index{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14})));
  return v[0];
}

}  // namespace dspark::kernels
