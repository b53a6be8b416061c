#include "kernels/activation.h"

#include <cmath>

#include "kernels/parallel.h"

namespace dspark::kernels {

namespace {
constexpr int64_t kGrain = 1 << 14;  // elements per thread at least: below that a team costs more
}

void silu_f32(const float* x, float* y, int64_t n) {
  parallel_ranges(n, kGrain, [&](int64_t begin, int64_t end) {
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
