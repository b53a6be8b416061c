// The attention kernel's AVX2 + FMA path (CPUs without AVX-512), the same algorithm as the
// AVX-512 one in attention.cpp with 8 float lanes:
//
// Scores: keys go in blocks of 8 aligned to multiples of 8; for one query row the 8 dot products
// are accumulated as 8 vectors (D / 8 FMAs each) and reduced together (reduce8) into one vector of
// 8 scores. The softmax's exponentials are taken 8 keys at a time (avx2_exp), and a row's output
// stays in registers across a block of values. Each (t, h) row is computed from its own q row and
// keys alone, with block boundaries fixed by absolute key index, so a row gets the same bits
// whatever else is in the batch (the row-invariance verification needs).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "kernels/attention_rows.h"
#include "kernels/avx2_exp.h"
#include "kernels/avx2_lanes.h"

namespace dspark::kernels::detail {
namespace {

#define DSPARK_AVX2 __attribute__((target("avx2,fma")))

// lane j of the result = sum of the 8 lanes of a[j].
DSPARK_AVX2 __attribute__((always_inline)) inline __m256 reduce8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  // u0 = [a0 a1 a2 a3 partial sums of the low 128 bits | the same of the high 128 bits]
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// p[s] = scale * q . k_s for the block of 8 keys starting at s0 (s0 % 8 == 0); keys past `last`
// read a row of zeros (they may lie past the cache) and are masked by the caller.
template <int NV>
DSPARK_AVX2 void score_block(const float* q, const float* kh, int64_t s0, int64_t last, const float* zeros,
                             float scale, float* p) {
  __m256 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const float* ks = s0 + j <= last ? kh + (s0 + j) * (NV * 8) : zeros;
    acc[j] = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(ks));
#pragma GCC unroll 32
    for (int c = 1; c < NV; ++c) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + c * 8), _mm256_loadu_ps(ks + c * 8), acc[j]);
  }
  _mm256_storeu_ps(p + s0, _mm256_mul_ps(reduce8(acc), _mm256_set1_ps(scale)));
}

template <int NV>
DSPARK_AVX2 void attention_rows(const AttentionShape& a, const float* q, const float* k, const float* v,
                                int64_t kv_head_stride, float* out, int64_t h0, int64_t h1, float* scratch) {
  constexpr int64_t D = NV * 8;
  alignas(32) static const float zeros[kAttentionMaxVectorDim] = {};
  const int64_t group = a.heads / a.kv_heads, stride = (a.keys + 15) / 16 * 16;  // scratch: [kAttentionRowTile, stride]
  using Row = AttentionRow;
  Row rows[kAttentionRowTile];
  for (int64_t g0 = h0; g0 < h1;) {  // heads [g0, g1) of one kv head
    const int64_t g1 = std::min(h1, (g0 / group + 1) * group);
    const float* kh = k + (g0 / group) * kv_head_stride;
    const float* vh = v + (g0 / group) * kv_head_stride;
    const int64_t count = (g1 - g0) * a.tokens;
    for (int64_t r0 = 0; r0 < count; r0 += kAttentionRowTile) {
      const int64_t n = std::min(kAttentionRowTile, count - r0);
      const auto [lo, hi] = fill_row_tile(a, q, out, D, scratch, stride, g0, g1, r0, n, 8, rows);
      // Scores, block by block over all rows.
      for (int64_t s0 = lo; s0 <= hi; s0 += 8)
        for (int64_t i = 0; i < n; ++i) {
          const Row& r = rows[i];
          if (s0 > r.last || s0 + 7 < r.first) continue;
          score_block<NV>(r.q, kh, s0, r.last, zeros, a.scale, r.p);
        }
      // Softmax per row: weights p[s] = exp(score - max) / sum.
      for (int64_t i = 0; i < n; ++i) {
        const Row& r = rows[i];
        float* p = r.p;
        if (a.softcap > 0)
          for (int64_t s = r.first; s <= r.last; ++s) p[s] = a.softcap * std::tanh(p[s] / a.softcap);
        // The maximum 8 keys at a time (a scalar max is a chain of dependent compares).
        __m256 mv = _mm256_set1_ps(-INFINITY);
        for (int64_t s = r.first; s <= r.last; s += 8) {
          const __m256i m = avx2_tail_mask(r.last + 1 - s);
          mv = _mm256_max_ps(mv, _mm256_blendv_ps(mv, _mm256_maskload_ps(p + s, m), _mm256_castsi256_ps(m)));
        }
        const __m256 mx = _mm256_set1_ps(avx2_max(mv));
        __m256 sum = _mm256_setzero_ps();
        for (int64_t s = r.first; s <= r.last; s += 8) {
          const __m256i m = avx2_tail_mask(r.last + 1 - s);
          const __m256 e = _mm256_and_ps(avx2_exp(_mm256_sub_ps(_mm256_maskload_ps(p + s, m), mx)), _mm256_castsi256_ps(m));
          _mm256_maskstore_ps(p + s, m, e);
          sum = _mm256_add_ps(sum, e);
        }
        const __m256 inv = _mm256_set1_ps(1.0f / avx2_sum(sum));
        for (int64_t s = r.first; s <= r.last; s += 8) {
          const __m256i m = avx2_tail_mask(r.last + 1 - s);
          _mm256_maskstore_ps(p + s, m, _mm256_mul_ps(_mm256_maskload_ps(p + s, m), inv));
        }
        std::fill(r.out, r.out + D, 0.0f);
      }
      // out += p[s] v_s, in key order for each row; the output rows live in `out` between blocks.
      for (int64_t s0 = lo; s0 <= hi; s0 += 8)
        for (int64_t i = 0; i < n; ++i) {
          const Row& r = rows[i];
          const int64_t sa = std::max(s0, r.first), sb = std::min(s0 + 7, r.last);
          if (sa > sb) continue;
          __m256 o[NV];
#pragma GCC unroll 32
          for (int c = 0; c < NV; ++c) o[c] = _mm256_loadu_ps(r.out + c * 8);
          for (int64_t s = sa; s <= sb; ++s) {
            const __m256 w = _mm256_set1_ps(r.p[s]);
            const float* vs = vh + s * D;
#pragma GCC unroll 32
            for (int c = 0; c < NV; ++c) o[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vs + c * 8), o[c]);
          }
#pragma GCC unroll 32
          for (int c = 0; c < NV; ++c) _mm256_storeu_ps(r.out + c * 8, o[c]);
        }
    }
    g0 = g1;
  }
}

template <size_t... I>
constexpr auto rows_table(std::index_sequence<I...>) {
  return std::array<AttentionRowsFn, sizeof...(I)>{&attention_rows<int(I) + 1>...};
}

}  // namespace

AttentionRowsFn attention_rows_avx2(int64_t D) {
  static constexpr auto table = rows_table(std::make_index_sequence<16>{});  // D = 8 .. 128
  if (D == 256) return &attention_rows<32>;
  if (D % 8 != 0 || D <= 0 || D > 128) return nullptr;
  return table[size_t(D / 8 - 1)];
}

DSPARK_AVX2 float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  if (i < n) {
    const __m256i m = avx2_tail_mask(n - i);
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc);
  }
  return avx2_sum(acc);
}

DSPARK_AVX2 void axpy_avx2(float w, const float* x, float* y, int64_t n) {
  const __m256 wv = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  if (i < n) {
    const __m256i m = avx2_tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, _mm256_fmadd_ps(wv, _mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m)));
  }
}

}  // namespace dspark::kernels::detail
