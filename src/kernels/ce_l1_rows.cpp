#include "kernels/ce_l1_rows.h"

#include <cmath>

#include "kernels/parallel.h"

namespace dspark::kernels {
namespace {

inline float sign_of(float x) { return float(x > 0.0f) - float(x < 0.0f); }

}  // namespace

void l1_rows(const float* p, const float* t, int64_t rows, int64_t V, float* l1, float* sign_dot) {
  parallel_ranges(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* pr = p + r * V;
      const float* tr = t + r * V;
      float dist = 0.0f, dot = 0.0f;
      for (int64_t i = 0; i < V; ++i) {
        const float diff = pr[i] - tr[i];
        dist += std::fabs(diff);
        dot += pr[i] * sign_of(diff);
      }
      l1[r] = dist;
      sign_dot[r] = dot;
    }
  });
}

void ce_l1_rows_backward(const float* p, const float* t, const int64_t* labels, const float* sign_dot,
                         const float* g_ce, const float* g_l1, int64_t rows, int64_t V, float* grad) {
  parallel_ranges(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* pr = p + r * V;
      const float* tr = t + r * V;
      float* gr = grad + r * V;
      const float a = g_ce[r], b = g_l1[r], shift = sign_dot[r];
      if (b == 0.0f) {
        for (int64_t i = 0; i < V; ++i) gr[i] = a * pr[i];
      } else {
        for (int64_t i = 0; i < V; ++i) gr[i] = pr[i] * (a + b * (sign_of(pr[i] - tr[i]) - shift));
      }
      gr[labels[r]] -= a;
    }
  });
}

}  // namespace dspark::kernels
