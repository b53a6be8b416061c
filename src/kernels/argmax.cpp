#include "kernels/argmax.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/matmul.h"  // Isa

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

// The same with 8 lanes, for CPUs without AVX-512 (the scalar scan cost a greedy verify of 8
// positions of an 8192 vocabulary about 0.2 ms there).
__attribute__((target("avx2,fma"))) ArgmaxResult argmax_avx2(const float* x, int64_t n) {
  if (n < 16) return argmax_scalar(x, n);
  const __m256 minus_inf = _mm256_set1_ps(-INFINITY), zero = _mm256_setzero_ps();
  __m256 best = _mm256_loadu_ps(x);
  __m256 non_finite = _mm256_cmp_ps(_mm256_mul_ps(best, zero), zero, _CMP_NEQ_UQ);  // inf * 0 = NaN
  best = _mm256_blendv_ps(best, minus_inf, _mm256_cmp_ps(best, best, _CMP_UNORD_Q));  // NaN lanes start at -inf
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), best_index = index;
  const __m256i step = _mm256_set1_epi32(8);
  int64_t i = 8;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    index = _mm256_add_epi32(index, step);
    non_finite = _mm256_or_ps(non_finite, _mm256_cmp_ps(_mm256_mul_ps(v, zero), zero, _CMP_NEQ_UQ));
    const __m256 greater = _mm256_cmp_ps(v, best, _CMP_GT_OQ);  // false for NaN
    best = _mm256_blendv_ps(best, v, greater);
    best_index = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(best_index), _mm256_castsi256_ps(index), greater));
  }
  alignas(32) float lane_best[8];
  alignas(32) int32_t lane_index[8];
  _mm256_store_ps(lane_best, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lane_index), best_index);
  int lane = 0;  // the largest maximum; among equal ones, the smallest index
  for (int j = 1; j < 8; ++j)
    if (lane_best[j] > lane_best[lane] || (lane_best[j] == lane_best[lane] && lane_index[j] < lane_index[lane])) lane = j;
  ArgmaxResult r;
  r.index = lane_best[lane] == -INFINITY ? 0 : lane_index[lane];
  r.all_finite = _mm256_movemask_ps(non_finite) == 0;
  for (; i < n; ++i) {  // the tail: larger indices, so strict > keeps the first maximum
    if (!std::isfinite(x[i])) r.all_finite = false;
    if (x[i] > x[r.index] || std::isnan(x[r.index])) r.index = i;
  }
  return r;
}

}  // namespace

ArgmaxResult argmax_f32_with(Isa isa, const float* x, int64_t n) {
  if (isa >= Isa::Avx512 && isa_supported(Isa::Avx512)) return argmax_avx512(x, n);
  if (isa >= Isa::Avx2 && isa_supported(Isa::Avx2)) return argmax_avx2(x, n);
  return argmax_scalar(x, n);
}

ArgmaxResult argmax_f32(const float* x, int64_t n) {
  static const Isa isa = best_isa();
  return argmax_f32_with(isa, x, n);
}

}  // namespace dspark::kernels
