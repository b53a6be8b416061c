#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/avx512_sum.h"
#include "kernels/parallel.h"

namespace dspark::kernels {
namespace {

// The two inner loops (q . k_s and out += p_s v_s) over D floats, vectorised where the CPU can.
float dot_scalar(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void axpy_scalar(float w, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
}

__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return avx512_sum(acc);
}
__attribute__((target("avx512f"))) void axpy_avx512(float w, const float* x, float* y, int64_t n) {
  const __m512 wv = _mm512_set1_ps(w);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

struct InnerLoops {
  float (*dot)(const float*, const float*, int64_t);
  void (*axpy)(float, const float*, float*, int64_t);
};

const InnerLoops& inner_loops() {
  static const InnerLoops loops = __builtin_cpu_supports("avx512f") ? InnerLoops{dot_avx512, axpy_avx512}
                                                                    : InnerLoops{dot_scalar, axpy_scalar};
  return loops;
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) { return inner_loops().dot(a, b, n); }
void axpy_f32(float w, const float* x, float* y, int64_t n) { inner_loops().axpy(w, x, y, n); }

void attention_f32(const AttentionShape& a, const float* q, const float* k, const float* v, int64_t kv_head_stride,
                   float* out) {
  const int64_t D = a.head_dim, group = a.heads / a.kv_heads;
  const InnerLoops& loops = inner_loops();
  parallel_ranges(a.heads, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> p(static_cast<size_t>(a.keys));  // scores, then probabilities
    for (int64_t h = h0; h < h1; ++h) {
      const float* kh = k + (h / group) * kv_head_stride;
      const float* vh = v + (h / group) * kv_head_stride;
      for (int64_t t = 0; t < a.tokens; ++t) {
        const int64_t last = std::min(a.keys - 1, a.position0 + t);               // newest visible key
        const int64_t first = a.window > 0 ? std::max<int64_t>(0, last - a.window + 1) : 0;
        const float* qt = q + (t * a.heads + h) * D;
        float max_score = -INFINITY;
        for (int64_t s = first; s <= last; ++s) {
          float score = loops.dot(qt, kh + s * D, D) * a.scale;
          if (a.softcap > 0) score = a.softcap * std::tanh(score / a.softcap);
          p[size_t(s)] = score;
          max_score = std::max(max_score, score);
        }
        float total = 0;
        for (int64_t s = first; s <= last; ++s) total += (p[size_t(s)] = std::exp(p[size_t(s)] - max_score));
        const float inv = 1.0f / total;
        float* ot = out + (t * a.heads + h) * D;
        std::fill(ot, ot + D, 0.0f);
        for (int64_t s = first; s <= last; ++s) {
          loops.axpy(p[size_t(s)] * inv, vh + s * D, ot, D);
        }
      }
    }
  });
}

}  // namespace dspark::kernels
