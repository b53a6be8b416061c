// exp(x) for 8 float lanes (AVX2 + FMA), shared by the SiLU and attention-softmax kernels: the
// AVX2 counterpart of avx512_exp.h, for CPUs without AVX-512.
//
// Same method: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2 (ln2 in two parts so r is
// exact), e^r by its Taylor polynomial of degree 7, times 2^n. AVX2 has no vscalefps: 2^n is built
// in the exponent field (as 2 * 2^(n-1), so that n = 128 still fits), which needs x clamped to
// [-86.9, ln(FLT_MAX)]; lanes above give +inf, as std::exp does, lanes below give 0 (std::exp
// would give a value under 2e-38). NaN propagates.
// Every lane is computed alone, so a value's result does not depend on its neighbours.
#pragma once

#include <immintrin.h>

namespace dspark::kernels {

__attribute__((target("avx2,fma"), always_inline)) inline __m256 avx2_exp(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-86.9f), hi = _mm256_set1_ps(88.72283f);  // n in [-125, 128]
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ), overflow = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  // min/max return their second operand when one is NaN: x stays NaN.
  x = _mm256_max_ps(lo, _mm256_min_ps(hi, x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);  // 12 significant bits: exact
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // 2^(n-1): (n - 1 + 127) in the exponent field; the factor 2 goes into p exactly. (A NaN lane
  // converts to INT_MIN; its p is NaN already.)
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23);
  const __m256 y = _mm256_mul_ps(_mm256_add_ps(p, p), _mm256_castsi256_ps(bits));
  return _mm256_blendv_ps(_mm256_andnot_ps(underflow, y), _mm256_set1_ps(__builtin_inff()), overflow);
}

}  // namespace dspark::kernels
