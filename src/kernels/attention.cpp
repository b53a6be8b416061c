#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/parallel.h"

namespace dspark::kernels {

void attention_f32(const AttentionShape& a, const float* q, const float* k, const float* v, int64_t kv_head_stride,
                   float* out) {
  const int64_t D = a.head_dim, group = a.heads / a.kv_heads;
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
          const float* ks = kh + s * D;
          float dot = 0;
          for (int64_t i = 0; i < D; ++i) dot += qt[i] * ks[i];
          float score = dot * a.scale;
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
          const float w = p[size_t(s)] * inv;
          const float* vs = vh + s * D;
          for (int64_t i = 0; i < D; ++i) ot[i] += w * vs[i];
        }
      }
    }
  });
}

}  // namespace dspark::kernels
