// Packed-panel bf16 decode products on AVX-512F by widening (see matmul_packed.h).
//
// The AVX2 kernel's arithmetic with 16 lanes: one 64-byte step of a panel holds k-pair q of its 16
// weight rows, [16, 2] bf16. Shifting every 32-bit lane left by 16 gives the even-k weights as
// float32, masking off the low 16 bits gives the odd-k weights; both are multiplied by broadcast x
// values (float32, not rounded to bf16) into 16 output lanes. Per output: acc = fma(x[i, p],
// w[j, p], acc) for p = 0, 1, ..., k - 1, whatever m, the block shape or the thread count, so the
// results equal the AVX2 kernel's bit for bit and each row's result is the same whatever else is in
// the batch (model/ops.h RowInvariantScope).
//
// Why it exists beside vdpbf16ps: vdpbf16ps does 32 multiply-adds per instruction but some CPUs
// issue it at a quarter of the FMA rate (bf16_dot_slower_than_widening), and CPUs with AVX-512F
// but no AVX512-BF16 had only the 8-lane AVX2 kernel. A pass of 8 x rows over 2 panels costs per
// k-pair 2 loads, 4 widening operations and 32 FMAs, against 16 vdpbf16ps.
//
// Blocks: 1-4 rows x 4 panels (up to 16 accumulators and the 8 widened vectors of the step),
// 5-8 rows x 2 panels (up to 16 accumulators and 4 widened vectors).
#include "kernels/matmul_packed_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

#include "kernels/matmul_packed_avx512_block.h"
#include "kernels/matmul_packed_walk.h"

namespace dspark::kernels::detail {
namespace {

#define DSPARK_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

constexpr int64_t kPanel = kPackedPanel;  // output rows per panel
constexpr int kMaxPassRows = 8;           // x rows per pass

// Rows [0, MR) of x (float32, k-pair q at x + 2q; `ldx` floats per row) against NP consecutive
// panels; writes the first `cols` (<= NP * 16) output columns of each row. With Prefetch, each
// step also asks for the same k-pair of the panels NP further on (the thread's next block).
template <int MR, int NP, bool Prefetch>
DSPARK_AVX512 void packed_block(const float* x, int64_t ldx, int64_t pairs, const uint16_t* panel,
                                int64_t panel_stride, float* y, int64_t ldy, int64_t cols) {
  __m512 acc[MR][NP];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();
  // GCC vector operations rather than _mm512_slli_epi32, whose GCC 12 definition trips
  // -Wmaybe-uninitialized (as in avx512_sum.h); they compile to the same vpslld / vpandd.
  using Lanes = unsigned __attribute__((vector_size(64)));
  for (int64_t q = 0; q < pairs; ++q) {
    if constexpr (Prefetch) prefetch_next_panels<NP>(panel, panel_stride, q);
    __m512 we[NP], wo[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) {
      const Lanes w = Lanes(_mm512_loadu_si512(panel + j * panel_stride + q * 2 * kPanel));
      we[j] = __m512(w << 16);
      wo[j] = __m512(w & 0xFFFF0000u);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 xe = _mm512_set1_ps(x[i * ldx + 2 * q]);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_fmadd_ps(xe, we[j], acc[i][j]);
      const __m512 xo = _mm512_set1_ps(x[i * ldx + 2 * q + 1]);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_fmadd_ps(xo, wo[j], acc[i][j]);
    }
  }
  store_block<MR, NP>(acc, y, ldy, cols);
}

using Blocks = PackedBlocks<float, kMaxPassRows>;

// 1-4 rows x 4 panels, 5-8 rows x 2 panels.
template <bool Prefetch>
const Blocks& blocks() {
  static const Blocks b = blocks_of_up_to_8_rows<float>([](auto rows, auto panels) {
    return &packed_block<decltype(rows)::value, decltype(panels)::value, Prefetch>;
  });
  return b;
}

// Seconds for `rounds` x 16 independent chains of the instruction (latency hidden, so this is its
// issue rate). The caller runs each once untimed first, to bring the vector units to full clock.
constexpr int kChains = 16;
__attribute__((target("avx512f,avx512bf16"), noinline)) double time_dpbf16(int64_t rounds) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = a;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
    asm volatile("" : "+v"(a));  // keeps the loop from being folded
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& v : acc) asm volatile("" ::"v"(v));
  return s;
}
DSPARK_AVX512 __attribute__((noinline)) double time_fma(int64_t rounds) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-9f);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(a, b, acc[c]);
    asm volatile("" : "+v"(a));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& v : acc) asm volatile("" ::"v"(v));
  return s;
}

}  // namespace

bool bf16_dot_slower_than_widening() {
  static const bool slower = [] {
    // Best of 5 interleaved trials of 8192 rounds each, 0.1 ms of vdpbf16ps on the Xeon measured
    // (a busy host only makes a trial slower).
    constexpr int64_t kRounds = 8192;
    time_dpbf16(kRounds);
    time_fma(kRounds);
    double dp = 1e30, fma = 1e30;
    for (int t = 0; t < 5; ++t) {
      dp = std::min(dp, time_dpbf16(kRounds));
      fma = std::min(fma, time_fma(kRounds));
    }
    // Per k-pair and panel a pass of 8 rows takes 8 vdpbf16ps, or 16 FMAs and 2 widening
    // operations on the same ports: widening wins when one vdpbf16ps takes more than 18 / 8
    // FMA slots. Measured: about 4 on an Intel Xeon (5th generation); about 1 expected on AMD
    // Zen 4 (vdpbf16ps at 32 multiply-adds per cycle there, docs/BENCHMARKS.md).
    return dp > 2.25 * fma * 1.2;  // a margin, so that a noisy trial near break-even keeps vdpbf16ps
  }();
  return slower;
}

void matmul_bf16_packed_avx512(const float* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y, int64_t ldy) {
  const auto [rows, stride] = float_rows_of_even_length(x, ldx, m, w);
  // Only a group's first pass prefetches: later passes find the group in cache.
  walk_packed_groups(rows, stride, m, w, y, ldy, w.streamed ? blocks<true>() : blocks<false>(), blocks<false>());
}

}  // namespace dspark::kernels::detail
