// Helpers over 8 float lanes shared by the AVX2 kernels (matmul, attention, SiLU): the
// horizontal sum and maximum, and the lane mask of a tail shorter than a vector.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace dspark::kernels {

__attribute__((target("avx2,fma"), always_inline)) inline float avx2_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"), always_inline)) inline float avx2_max(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lanes [0, min(n, 8)) set, for _mm256_maskload_ps / _mm256_maskstore_ps of a tail.
__attribute__((target("avx2,fma"), always_inline)) inline __m256i avx2_tail_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n < 8 ? n : 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace dspark::kernels
