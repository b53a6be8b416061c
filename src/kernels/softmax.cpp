#include "kernels/softmax.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>

#include "kernels/avx2_exp.h"
#include "kernels/avx2_lanes.h"
#include "kernels/avx512_exp.h"
#include "kernels/avx512_sum.h"
#include "kernels/matmul.h"  // Isa
#include "kernels/parallel.h"

namespace dspark::kernels {
namespace {

__mmask16 tail_mask(int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); }

// One row; false when it holds a NaN or an infinity.
__attribute__((target("avx512f"))) bool softmax_row(const float* x, int64_t n, float scale, float* y) {
  // Pass 1: the maximum, and x * 0 summed (NaN as soon as one x is a NaN or an infinity).
  __m512 mx = _mm512_set1_ps(-INFINITY), nonfinite = _mm512_setzero_ps();
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, x + i);
    mx = _mm512_mask_max_ps(mx, __mmask16(0xFFFF), mx, v);
    nonfinite = _mm512_add_ps(nonfinite, _mm512_maskz_mul_ps(m, v, zero));
  }
  if (!std::isfinite(avx512_sum(nonfinite))) return false;
  // Pass 2: e = exp((x - max) * scale) and their sum (float lanes per 1024 elements, then in
  // double: a float sum over a 152K vocabulary drifts by ~1e-5); pass 3: scale to 1.
  const __m512 xmax = _mm512_set1_ps(avx512_max(mx)), s = _mm512_set1_ps(scale);
  double total = 0.0;
  for (int64_t b = 0; b < n; b += 1024) {
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = b; i < std::min(n, b + 1024); i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __m512 e = avx512_exp(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), xmax), s));
      _mm512_mask_storeu_ps(y + i, m, e);
      sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
    }
    total += avx512_sum(sum);
  }
  const __m512 inv = _mm512_set1_ps(float(1.0 / total));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), inv));
  }
  return true;
}

// The same passes with 8 lanes (AVX2 + FMA): masked loads read zeros past the end, so the
// maximum's tail lanes are set to -inf and the sums' tail lanes masked off.
__attribute__((target("avx2,fma"))) bool softmax_row_avx2(const float* x, int64_t n, float scale, float* y) {
  const __m256 minus_inf = _mm256_set1_ps(-INFINITY), zero = _mm256_setzero_ps();
  __m256 mx = minus_inf, nonfinite = zero;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = avx2_tail_mask(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    mx = _mm256_max_ps(mx, _mm256_blendv_ps(minus_inf, v, _mm256_castsi256_ps(m)));
    nonfinite = _mm256_add_ps(nonfinite, _mm256_mul_ps(v, zero));
  }
  if (!std::isfinite(avx2_sum(nonfinite))) return false;
  const __m256 xmax = _mm256_set1_ps(avx2_max(mx)), s = _mm256_set1_ps(scale);
  double total = 0.0;
  for (int64_t b = 0; b < n; b += 1024) {
    __m256 sum = zero;
    for (int64_t i = b; i < std::min(n, b + 1024); i += 8) {
      const __m256i m = avx2_tail_mask(n - i);
      const __m256 e = avx2_exp(_mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), xmax), s));
      _mm256_maskstore_ps(y + i, m, e);
      sum = _mm256_add_ps(sum, _mm256_and_ps(e, _mm256_castsi256_ps(m)));
    }
    total += avx2_sum(sum);
  }
  const __m256 inv = _mm256_set1_ps(float(1.0 / total));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = avx2_tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(_mm256_maskload_ps(y + i, m), inv));
  }
  return true;
}

}  // namespace

bool softmax_rows_supported() { return best_isa() >= Isa::Avx2; }

bool softmax_rows_f32(const float* x, int64_t rows, int64_t n, float scale, float* y) {
  return softmax_rows_f32_with(best_isa(), x, rows, n, scale, y);
}

bool softmax_rows_f32_with(Isa isa, const float* x, int64_t rows, int64_t n, float scale, float* y) {
  const bool wide = isa >= Isa::Avx512 && isa_supported(Isa::Avx512);
  if (!wide && !(isa >= Isa::Avx2 && isa_supported(Isa::Avx2)))
    throw std::invalid_argument("softmax_rows_f32: needs AVX2 + FMA");
  std::atomic<bool> finite{true};
  auto run = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      if (!(wide ? softmax_row : softmax_row_avx2)(x + r * n, n, scale, y + r * n)) finite = false;
  };
  // One thread below ~64K elements: the team's fork/join would cost more than the rows.
  if (rows > 1 && rows * n >= (int64_t(1) << 16))
    parallel_ranges(rows, 1, run);
  else
    run(0, rows);
  return finite;
}

}  // namespace dspark::kernels
