#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention_rows.h"
#include "kernels/avx512_exp.h"
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

InnerLoops inner_loops(Isa isa) {
  if (isa >= Isa::Avx512) return {dot_avx512, axpy_avx512};
  if (isa >= Isa::Avx2) return {detail::dot_avx2, detail::axpy_avx2};
  return {dot_scalar, axpy_scalar};
}

// The AVX-512 path for D a multiple of 16 up to 256.
//
// Scores: keys go in blocks of 16 aligned to multiples of 16; for one query row the 16 dot
// products are accumulated as 16 vectors (D / 16 FMAs each) and reduced together by a transpose
// tree (reduce16) into one vector of 16 scores, instead of 16 separate horizontal sums. The
// softmax's exponentials are then taken 16 keys at a time, and the row's output stays in
// registers across its keys. Each (t, h) row is computed from its own q row and keys alone, with
// block boundaries fixed by absolute key index, so a row gets the same bits whatever else is in
// the batch (the row-invariance verification needs).
constexpr int64_t kMaxVectorDim = detail::kAttentionMaxVectorDim;

// lane j of the result = sum of the 16 lanes of a[j]. (GCC vector shuffles: the unpack and
// shuffle intrinsics of GCC 12 trip -Wmaybe-uninitialized, see avx512_sum.h.)
__attribute__((target("avx512f"), always_inline)) inline __m512 reduce16(const __m512* a) {
  using V = float __attribute__((vector_size(64)));
  using I = int __attribute__((vector_size(64)));
  constexpr I kUnpackLoPs = {0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29};
  constexpr I kUnpackHiPs = {2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31};
  constexpr I kUnpackLoPd = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
  constexpr I kUnpackHiPd = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
  constexpr I kEvenLanes = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};  // a.L0 a.L2 b.L0 b.L2
  constexpr I kOddLanes = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};  // a.L1 a.L3 b.L1 b.L3
  V b[8], c[4], e[2];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: partial sums of a[2i], a[2i+1] interleaved
    const V x = V(a[2 * i]), y = V(a[2 * i + 1]);
    b[i] = __builtin_shuffle(x, y, kUnpackLoPs) + __builtin_shuffle(x, y, kUnpackHiPs);
  }
  for (int i = 0; i < 4; ++i)  // per 128-bit lane L: the lane's sums of a[4i] .. a[4i+3]
    c[i] = __builtin_shuffle(b[2 * i], b[2 * i + 1], kUnpackLoPd) + __builtin_shuffle(b[2 * i], b[2 * i + 1], kUnpackHiPd);
  for (int i = 0; i < 2; ++i)
    e[i] = __builtin_shuffle(c[2 * i], c[2 * i + 1], kEvenLanes) + __builtin_shuffle(c[2 * i], c[2 * i + 1], kOddLanes);
  return __m512(__builtin_shuffle(e[0], e[1], kEvenLanes) + __builtin_shuffle(e[0], e[1], kOddLanes));
}

// p[s] = scale * q . k_s for the block of 16 keys starting at s0 (s0 % 16 == 0); keys past
// `last` read a row of zeros (they may lie past the cache) and are masked by the caller.
template <int NV>
__attribute__((target("avx512f"))) void score_block(const __m512* qv, const float* kh, int64_t s0, int64_t last,
                                                   const float* zeros, float scale, float* p) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    const float* ks = s0 + j <= last ? kh + (s0 + j) * (NV * 16) : zeros;
    acc[j] = _mm512_mul_ps(qv[0], _mm512_loadu_ps(ks));
#pragma GCC unroll 16
    for (int c = 1; c < NV; ++c) acc[j] = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(ks + c * 16), acc[j]);
  }
  _mm512_storeu_ps(p + s0, _mm512_mul_ps(reduce16(acc), _mm512_set1_ps(scale)));
}

constexpr int64_t kRowTile = detail::kAttentionRowTile;

template <int NV>
__attribute__((target("avx512f"))) void attention_rows_avx512(const AttentionShape& a, const float* q, const float* k,
                                                              const float* v, int64_t kv_head_stride, float* out,
                                                              int64_t h0, int64_t h1, float* scratch) {
  constexpr int64_t D = NV * 16;
  alignas(64) static const float zeros[kMaxVectorDim] = {};
  const int64_t group = a.heads / a.kv_heads, stride = (a.keys + 15) / 16 * 16;  // scratch: [kRowTile, stride]
  using Row = detail::AttentionRow;
  Row rows[kRowTile];
  for (int64_t g0 = h0; g0 < h1;) {  // heads [g0, g1) of one kv head
    const int64_t g1 = std::min(h1, (g0 / group + 1) * group);
    const float* kh = k + (g0 / group) * kv_head_stride;
    const float* vh = v + (g0 / group) * kv_head_stride;
    const int64_t count = (g1 - g0) * a.tokens;
    for (int64_t r0 = 0; r0 < count; r0 += kRowTile) {
      const int64_t n = std::min(kRowTile, count - r0);
      const auto [lo, hi] = detail::fill_row_tile(a, q, out, D, scratch, stride, g0, g1, r0, n, 16, rows);
      // Scores, block by block over all rows.
      for (int64_t s0 = lo; s0 <= hi; s0 += 16)
        for (int64_t i = 0; i < n; ++i) {
          const Row& r = rows[i];
          if (s0 > r.last || s0 + 15 < r.first) continue;
          __m512 qv[NV];
#pragma GCC unroll 16
          for (int c = 0; c < NV; ++c) qv[c] = _mm512_loadu_ps(r.q + c * 16);
          score_block<NV>(qv, kh, s0, r.last, zeros, a.scale, r.p);
        }
      // Softmax per row: weights p[s] = exp(score - max) / sum.
      for (int64_t i = 0; i < n; ++i) {
        const Row& r = rows[i];
        float* p = r.p;
        if (a.softcap > 0)
          for (int64_t s = r.first; s <= r.last; ++s) p[s] = a.softcap * std::tanh(p[s] / a.softcap);
        // The maximum 16 keys at a time: a scalar max is a chain of dependent compares (~3 cycles
        // per key), which took as long as the row's dot products.
        __m512 mv = _mm512_set1_ps(-INFINITY);
        for (int64_t s = r.first; s <= r.last; s += 16) {
          const __mmask16 m = r.last + 1 - s >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (r.last + 1 - s)) - 1);
          mv = _mm512_mask_max_ps(mv, m, mv, _mm512_maskz_loadu_ps(m, p + s));
        }
        const __m512 mx = _mm512_set1_ps(avx512_max(mv));
        __m512 sum = _mm512_setzero_ps();
        for (int64_t s = r.first; s <= r.last; s += 16) {
          const __mmask16 m = r.last + 1 - s >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (r.last + 1 - s)) - 1);
          const __m512 e = avx512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + s), mx));
          _mm512_mask_storeu_ps(p + s, m, e);
          sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
        }
        const __m512 inv = _mm512_set1_ps(1.0f / avx512_sum(sum));
        for (int64_t s = r.first; s <= r.last; s += 16) {
          const __mmask16 m = r.last + 1 - s >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (r.last + 1 - s)) - 1);
          _mm512_mask_storeu_ps(p + s, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + s), inv));
        }
        std::fill(r.out, r.out + D, 0.0f);
      }
      // out += p[s] v_s, in key order for each row; the output rows live in `out` between blocks.
      for (int64_t s0 = lo; s0 <= hi; s0 += 16)
        for (int64_t i = 0; i < n; ++i) {
          const Row& r = rows[i];
          const int64_t sa = std::max(s0, r.first), sb = std::min(s0 + 15, r.last);
          if (sa > sb) continue;
          __m512 o[NV];
#pragma GCC unroll 16
          for (int c = 0; c < NV; ++c) o[c] = _mm512_loadu_ps(r.out + c * 16);
          for (int64_t s = sa; s <= sb; ++s) {
            const __m512 w = _mm512_set1_ps(r.p[s]);
            const float* vs = vh + s * D;
#pragma GCC unroll 16
            for (int c = 0; c < NV; ++c) o[c] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vs + c * 16), o[c]);
          }
#pragma GCC unroll 16
          for (int c = 0; c < NV; ++c) _mm512_storeu_ps(r.out + c * 16, o[c]);
        }
    }
    g0 = g1;
  }
}

using RowsFn = detail::AttentionRowsFn;

// The vector path of this ISA for this head size, or nullptr (the generic loops then).
RowsFn vector_rows(Isa isa, int64_t D) {
  if (isa >= Isa::Avx512 && D % 16 == 0 && D > 0 && D <= kMaxVectorDim) {
    static const RowsFn table[] = {&attention_rows_avx512<1>,  &attention_rows_avx512<2>,  &attention_rows_avx512<3>,
                                   &attention_rows_avx512<4>,  &attention_rows_avx512<5>,  &attention_rows_avx512<6>,
                                   &attention_rows_avx512<7>,  &attention_rows_avx512<8>,  &attention_rows_avx512<9>,
                                   &attention_rows_avx512<10>, &attention_rows_avx512<11>, &attention_rows_avx512<12>,
                                   &attention_rows_avx512<13>, &attention_rows_avx512<14>, &attention_rows_avx512<15>,
                                   &attention_rows_avx512<16>};
    return table[D / 16 - 1];
  }
  if (isa >= Isa::Avx2) return detail::attention_rows_avx2(D);
  return nullptr;
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) { return inner_loops(best_isa()).dot(a, b, n); }
void axpy_f32(float w, const float* x, float* y, int64_t n) { inner_loops(best_isa()).axpy(w, x, y, n); }

void attention_f32(const AttentionShape& a, const float* q, const float* k, const float* v, int64_t kv_head_stride,
                   float* out) {
  attention_f32_with(best_isa(), a, q, k, v, kv_head_stride, out);
}

void attention_f32_with(Isa isa, const AttentionShape& a, const float* q, const float* k, const float* v,
                        int64_t kv_head_stride, float* out) {
  if (!isa_supported(isa)) throw std::invalid_argument(std::string("CPU lacks ISA path ") + isa_name(isa));
  const int64_t D = a.head_dim, group = a.heads / a.kv_heads;
  const InnerLoops loops = inner_loops(isa);
  if (const RowsFn rows = vector_rows(isa, D)) {
    parallel_ranges(a.heads, 1, [&](int64_t h0, int64_t h1) {
      std::vector<float> scratch(static_cast<size_t>(kRowTile * ((a.keys + 15) / 16 * 16)));
      rows(a, q, k, v, kv_head_stride, out, h0, h1, scratch.data());
    });
    return;
  }
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
