#include "kernels/activation.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/avx2_exp.h"
#include "kernels/avx2_lanes.h"
#include "kernels/avx512_exp.h"
#include "kernels/matmul.h"  // best_isa
#include "kernels/parallel.h"

namespace dspark::kernels {

namespace {
constexpr int64_t kGrain = 1 << 14;  // elements per thread at least: below that a team costs more

// Tails are masked vectors, so every element takes the same instructions wherever it sits.
__attribute__((target("avx512f"))) void silu_avx512(const float* x, float* y, int64_t begin, int64_t end) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = begin; i < end; i += 16) {
    const __mmask16 m = end - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (end - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 e = avx512_exp(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
}

__attribute__((target("avx2,fma"))) void silu_avx2(const float* x, float* y, int64_t begin, int64_t end) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = begin; i < end; i += 8) {
    const __m256i m = avx2_tail_mask(end - i);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    const __m256 e = avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), v));
    _mm256_maskstore_ps(y + i, m, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
}

void silu_scalar(const float* x, float* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}
}  // namespace

void silu_f32(const float* x, float* y, int64_t n) {
  static const auto impl = best_isa() >= Isa::Avx512 ? silu_avx512 : best_isa() >= Isa::Avx2 ? silu_avx2 : silu_scalar;
  parallel_ranges(n, kGrain, [&](int64_t begin, int64_t end) { impl(x, y, begin, end); });
}

void gelu_tanh_f32(const float* x, float* y, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  parallel_ranges(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
    }
  });
}

}  // namespace dspark::kernels
