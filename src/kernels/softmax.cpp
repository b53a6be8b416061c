#include "kernels/softmax.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>

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

}  // namespace

bool softmax_rows_supported() { return best_isa() >= Isa::Avx512; }

bool softmax_rows_f32(const float* x, int64_t rows, int64_t n, float scale, float* y) {
  std::atomic<bool> finite{true};
  auto run = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      if (!softmax_row(x + r * n, n, scale, y + r * n)) finite = false;
  };
  // One thread below ~64K elements: the team's fork/join would cost more than the rows.
  if (rows > 1 && rows * n >= (int64_t(1) << 16))
    parallel_ranges(rows, 1, run);
  else
    run(0, rows);
  return finite;
}

}  // namespace dspark::kernels
