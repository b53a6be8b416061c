#include "kernels/argmax.h"

#include <immintrin.h>

#include <cmath>

namespace dspark::kernels {
namespace {

ArgmaxResult argmax_scalar(const float* x, int64_t n) {
  ArgmaxResult r;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) r.all_finite = false;
    if (x[i] > x[r.index] || std::isnan(x[r.index])) r.index = i;
  }
  if (std::isnan(x[r.index])) r.index = 0;  // an all-NaN row
  return r;
}

// 16 lanes, each holding the first index of its own maximum (strict > keeps the first). The row's
// first maximum is the smallest lane index among the lanes whose maximum equals the row's.
__attribute__((target("avx512f"))) ArgmaxResult argmax_avx512(const float* x, int64_t n) {
  if (n < 32) return argmax_scalar(x, n);
  __m512 best = _mm512_loadu_ps(x);
  __m512i best_index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i index = best_index;
  const __m512i step = _mm512_set1_epi32(16);
  const __m512 zero = _mm512_setzero_ps();
  __mmask16 non_finite = _mm512_cmp_ps_mask(_mm512_mul_ps(best, zero), zero, _CMP_NEQ_UQ);  // inf * 0 = NaN
  // NaN lanes must not win: start them at -inf.
  best = _mm512_mask_mov_ps(best, _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q), _mm512_set1_ps(-INFINITY));
  int64_t i = 16;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    index = _mm512_add_epi32(index, step);
    non_finite |= _mm512_cmp_ps_mask(_mm512_mul_ps(v, zero), zero, _CMP_NEQ_UQ);
    const __mmask16 greater = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);  // false for NaN
    best = _mm512_mask_mov_ps(best, greater, v);
    best_index = _mm512_mask_mov_epi32(best_index, greater, index);
  }
  alignas(64) float lane_best[16];
  alignas(64) int32_t lane_index[16];
  _mm512_store_ps(lane_best, best);
  _mm512_store_si512(lane_index, best_index);
  int lane = 0;  // the largest maximum; among equal ones, the smallest index
  for (int j = 1; j < 16; ++j)
    if (lane_best[j] > lane_best[lane] || (lane_best[j] == lane_best[lane] && lane_index[j] < lane_index[lane])) lane = j;
  ArgmaxResult r;
  r.index = lane_best[lane] == -INFINITY ? 0 : lane_index[lane];  // -inf: no finite element yet (or all NaN)
  r.all_finite = non_finite == 0;
  for (; i < n; ++i) {  // the tail: larger indices, so strict > keeps the first maximum
    if (!std::isfinite(x[i])) r.all_finite = false;
    if (x[i] > x[r.index] || std::isnan(x[r.index])) r.index = i;
  }
  return r;
}

}  // namespace

ArgmaxResult argmax_f32(const float* x, int64_t n) {
  static const auto impl = __builtin_cpu_supports("avx512f") ? argmax_avx512 : argmax_scalar;
  return impl(x, n);
}

}  // namespace dspark::kernels
