// exp(x) for 16 float lanes (AVX-512), shared by the SiLU and attention-softmax kernels.
//
// Why: the scalar std::exp in those loops cost more than the rest of them together (SiLU over
// [8, 1536] per layer, softmax over every key of every head). Method: x = n ln2 + r with
// n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split in two parts so r is exact to float), e^r by its
// Taylor polynomial of degree 7 (truncation below 2^-27 relative), then scaled by 2^n with
// vscalefps, which also gives +inf above ~88.7, 0 below ~-103 and propagates NaN.
// Max error measured against double: about 2 ulp (tests/kernels/activation_test.cpp).
// Every lane is computed alone, so a value's result does not depend on its neighbours.
#pragma once

#include <immintrin.h>

namespace dspark::kernels {

__attribute__((target("avx512f"), always_inline)) inline __m512 avx512_exp(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693145751953125f);     // 12 significant bits: n * hi is exact
  const __m512 ln2_lo = _mm512_set1_ps(1.428606765330187e-06f);  // ln2 - ln2_hi
  // Clamp so n stays a small integer; scalef still saturates to inf / 0 beyond float's range.
  // (Operand order keeps NaN: min/max return their second operand when one is NaN. The masked
  // forms with an all-ones mask are the plain operations; GCC 12's unmasked intrinsics pass an
  // undefined vector that trips -Wmaybe-uninitialized.)
  const __mmask16 all = 0xFFFF;
  x = _mm512_mask_min_ps(x, all, _mm512_set1_ps(100.0f), x);
  x = _mm512_mask_max_ps(x, all, _mm512_set1_ps(-110.0f), x);
  const __m512 n = _mm512_mask_roundscale_ps(x, all, _mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_mask_scalef_ps(p, all, p, n);
}

}  // namespace dspark::kernels
