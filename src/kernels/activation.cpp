#include "kernels/activation.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/avx512_exp.h"
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

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
}  // namespace

void silu_f32(const float* x, float* y, int64_t n) {
  const bool vector = has_avx512();
  parallel_ranges(n, kGrain, [&](int64_t begin, int64_t end) {
    if (vector) return silu_avx512(x, y, begin, end);
    for (int64_t i = begin; i < end; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
  });
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
