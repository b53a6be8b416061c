// Packed-panel bf16 decode products (see matmul_packed.h).
//
// Work (kernels/matmul_packed_walk.h): a thread takes a contiguous run of panels (one linear stream
// of weights). It walks them in groups of 4 panels (64 output columns); for each group every pass
// of up to 8 x rows reads the group's weights (4 * kp * 32 bytes, 64 KiB for k = 512) from memory
// once and from cache after.
// Accumulators: rows x panels zmm registers, 16 at most (4 rows x 4 panels or 8 rows x 2 panels).
#include "kernels/matmul_packed.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/matmul.h"
#include "kernels/matmul_packed_avx2.h"
#include "kernels/matmul_packed_avx512.h"
#include "kernels/matmul_packed_avx512_block.h"
#include "kernels/matmul_packed_walk.h"

namespace dspark::kernels {
namespace {

constexpr int64_t kPanel = detail::kPackedPanel;  // output rows per panel (float lanes of a zmm)
constexpr int kMaxPassRows = 8;                   // x rows per pass
// A streamed matrix (PackedBf16::streamed): each block prefetches the next block's panels into L2
// in lockstep (the same k-pair of the panels NP further on: NP * 16 * kp * 2 bytes ahead in the
// thread's linear stream, 32-64 KiB for k = 512).
// With 4+ rows a pass is compute-bound enough that the hardware prefetcher alone falls behind and
// memory time adds to compute time instead of overlapping it; one row gains too. History, streamed
// from DRAM (bench MatmulStream, 2 threads): a prefetch 8 KiB ahead inside the same panel took m = 8
// from 1.30-1.36x to 1.13-1.17x the m = 1 time on 512 x 1536 and 512 x 8192; the lockstep lead
// instead (and for every row count) took m = 8 a further 4-16% lower on 512 x 512 .. 512 x 8192 and
// m = 1 about 13-15% lower on 512 x 1536 and 512 x 8192 (three interleaved runs each;
// docs/BENCHMARKS.md).
// On a matrix in cache the prefetches cost m = 1 some 15% (MatmulCached), hence the flag.

#define DSPARK_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Rows [0, MR) of x (bf16 pairs, `ldq` pairs per row) against NP consecutive panels; writes the
// first `cols` (<= NP * 16) output columns of each row.
template <int MR, int NP, bool Prefetch>
DSPARK_AVX512BF16 void packed_block(const uint32_t* xq, int64_t ldq, int64_t pairs, const uint16_t* panel,
                                    int64_t panel_stride, float* y, int64_t ldy, int64_t cols) {
  __m512 acc[MR][NP];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    if constexpr (Prefetch) detail::prefetch_next_panels<NP>(panel, panel_stride, q);
    __m512bh wv[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j)
      wv[j] = (__m512bh)_mm512_loadu_si512(panel + j * panel_stride + q * 2 * kPanel);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(int(xq[i * ldq + q]));
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  detail::store_block<MR, NP>(acc, y, ldy, cols);
}

using Blocks = detail::PackedBlocks<uint32_t, kMaxPassRows>;

// 1-4 rows x 4 panels, 5-8 rows x 2 panels.
template <bool Prefetch>
const Blocks& blocks() {
  static const Blocks b = detail::blocks_of_up_to_8_rows<uint32_t>([](auto rows, auto panels) {
    return &packed_block<decltype(rows)::value, decltype(panels)::value, Prefetch>;
  });
  return b;
}

// x [m, k] (row stride ldx) -> bf16 (round to nearest even), rows of kp elements, zero padded.
DSPARK_AVX512BF16 void convert_rows(const float* x, int64_t ldx, int64_t m, int64_t k, uint16_t* xb, int64_t kp) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < kp; p += 16) {
      const int64_t left = std::min<int64_t>(16, kp - p), valid = std::clamp<int64_t>(k - p, 0, 16);
      const __m512 v = _mm512_maskz_loadu_ps(__mmask16((1u << valid) - 1), x + i * ldx + p);
      const __m256i b = (__m256i)_mm512_cvtneps_pbh(v);
      _mm256_mask_storeu_epi16(xb + i * kp + p, __mmask16((1u << left) - 1), b);
    }
  }
}

}  // namespace

Isa packed_bf16_isa() {
  static const Isa isa = [] {
    switch (best_isa()) {
      case Isa::Avx512Bf16: {
        // vdpbf16ps unless this CPU issues it so slowly that widening is faster; DSPARK_ISA=avx512bf16
        // keeps it regardless (before/after comparisons).
        const char* forced = std::getenv("DSPARK_ISA");
        if (forced && std::string(forced) == isa_name(Isa::Avx512Bf16)) return Isa::Avx512Bf16;
        return detail::bf16_dot_slower_than_widening() ? Isa::Avx512 : Isa::Avx512Bf16;
      }
      case Isa::Avx512: return Isa::Avx512;
      case Isa::Avx2: return Isa::Avx2;
      default: return Isa::Scalar;
    }
  }();
  return isa;
}

bool packed_bf16_supported() { return packed_bf16_isa() != Isa::Scalar; }

PackedBf16 pack_bf16(const uint16_t* w, int64_t ldw, int64_t n, int64_t k) {
  if (n < 0 || k < 0 || ldw < k) throw std::invalid_argument("pack_bf16: bad sizes or strides");
  PackedBf16 packed;
  packed.n = n;
  packed.k = k;
  const int64_t kp = packed.kp(), panels = (n + kPanel - 1) / kPanel;
  packed.data.assign(size_t(panels * kp * kPanel), 0);
  for (int64_t j = 0; j < n; ++j) {
    uint16_t* panel = packed.data.data() + (j / kPanel) * kp * kPanel;
    const int64_t lane = j % kPanel;
    for (int64_t p = 0; p < k; ++p) panel[(p / 2) * 2 * kPanel + lane * 2 + (p % 2)] = w[j * ldw + p];
  }
  return packed;
}

void matmul_bf16_packed(const float* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y, int64_t ldy) {
  if (!packed_bf16_supported()) throw std::invalid_argument("matmul_bf16_packed: CPU lacks AVX2 + FMA");
  matmul_bf16_packed_with(packed_bf16_isa(), x, ldx, m, w, y, ldy);
}

void matmul_bf16_packed_with(Isa isa, const float* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y,
                             int64_t ldy) {
  if ((isa != Isa::Avx512Bf16 && isa != Isa::Avx512 && isa != Isa::Avx2) || !isa_supported(isa))
    throw std::invalid_argument(std::string("matmul_bf16_packed: no packed path ") + isa_name(isa) + " on this CPU");
  if (m < 0 || ldx < w.k || ldy < w.n) throw std::invalid_argument("matmul_bf16_packed: bad sizes or strides");
  if (m == 0 || w.n == 0) return;
  if (isa == Isa::Avx2) return detail::matmul_bf16_packed_avx2(x, ldx, m, w, y, ldy);
  if (isa == Isa::Avx512) return detail::matmul_bf16_packed_avx512(x, ldx, m, w, y, ldy);
  const int64_t kp = w.kp();
  // Reused per calling thread: [m, kp] bf16.
  thread_local std::vector<uint16_t> buffer;
  if (buffer.size() < size_t(m * kp)) buffer.resize(size_t(m * kp));
  convert_rows(x, ldx, m, w.k, buffer.data(), kp);
  const Blocks& table = w.streamed ? blocks<true>() : blocks<false>();
  detail::walk_packed_groups(reinterpret_cast<const uint32_t*>(buffer.data()), kp / 2, m, w, y, ldy, table, table);
}

}  // namespace dspark::kernels
