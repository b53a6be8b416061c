// Skinny matrix products y[m, n] = x[m, k] * w[n, k]^T for decoding (see matmul.h).
//
// Layout of the work: n is cut into blocks of NR weight rows; threads take contiguous runs of
// blocks (so each streams its own part of w). For one block, the m activation rows are processed
// MR at a time: the NR weight rows (NR * k elements, a few KiB .. tens of KiB) are read from memory
// once for the first MR rows and from L1/L2 for the next ones. Each (activation row, weight row)
// pair gets its own vector accumulator of float32 lanes, reduced horizontally at the end.
//
// ISA paths are compiled with function-level target attributes (the build adds no -m flags) and
// chosen at run time with __builtin_cpu_supports.
#include "kernels/matmul.h"

#include "kernels/avx2_lanes.h"
#include "kernels/avx512_sum.h"
#include "kernels/matmul_amx.h"
#include "kernels/parallel.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace dspark::kernels {

namespace {

// ---------------------------------------------------------------------------------------------
// Scalar helpers.

inline float bf16_to_f32(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float load_f32(const float* p) { return *p; }
inline float load_f32(const uint16_t* p) { return bf16_to_f32(*p); }

// One block of the work: rows [0, MR) of x against rows [0, NR) of w, written to y. x and w are
// already offset to the block. XT: activation element type (float, or bf16 bits for vdpbf16ps);
// WT: weight element type (float or bf16 bits).
template <class XT, class WT>
using BlockFn = void (*)(const XT* x, int64_t ldx, int64_t k, const WT* w, int64_t ldw, float* y,
                         int64_t ldy);

// A path = micro-kernels for every row count 1..mr, for full blocks of nr weight rows and for
// single leftover weight rows.
template <class XT, class WT>
struct Path {
  int mr = 1, nr = 1;
  BlockFn<XT, WT> full[4] = {};    // [rows of x - 1], nr weight rows
  BlockFn<XT, WT> single[4] = {};  // [rows of x - 1], 1 weight row
};

template <class XT, class WT>
void run_path(const Path<XT, WT>& path, const XT* x, int64_t ldx, int64_t m, int64_t k, const WT* w,
              int64_t ldw, int64_t n, float* y, int64_t ldy) {
  const int64_t nr = path.nr, blocks = (n + nr - 1) / nr;
  // Enough work per thread (>= 128 KiB of weights per pass over the rows of x) that the fork/join
  // (~microseconds) pays off; with several passes (m > MR) small matrices are worth splitting too.
  const int64_t passes = (m + path.mr - 1) / path.mr;
  const int64_t block_bytes = std::max<int64_t>(1, nr * k * int64_t(sizeof(WT)) * passes);
  const int64_t grain = std::max<int64_t>(1, (int64_t(128) << 10) / block_bytes);
  parallel_ranges(blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t j0 = b * nr, rows = std::min(nr, n - j0);
      for (int64_t i0 = 0; i0 < m; i0 += path.mr) {
        const int64_t mm = std::min<int64_t>(path.mr, m - i0);
        const XT* xi = x + i0 * ldx;
        float* yi = y + i0 * ldy;
        if (rows == nr) {
          path.full[mm - 1](xi, ldx, k, w + j0 * ldw, ldw, yi + j0, ldy);
        } else {
          for (int64_t j = j0; j < j0 + rows; ++j) path.single[mm - 1](xi, ldx, k, w + j * ldw, ldw, yi + j, ldy);
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Scalar path: one (x row, w row) pair at a time, four partial sums.

template <class WT>
void scalar_block(const float* x, int64_t ldx, int64_t k, const WT* w, int64_t ldw, float* y, int64_t ldy) {
  float s[4] = {0, 0, 0, 0};
  int64_t p = 0;
  for (; p + 4 <= k; p += 4)
    for (int q = 0; q < 4; ++q) s[q] += x[p + q] * load_f32(w + p + q);
  for (; p < k; ++p) s[0] += x[p] * load_f32(w + p);
  *y = (s[0] + s[1]) + (s[2] + s[3]);
}

template <class WT>
Path<float, WT> scalar_path() {
  Path<float, WT> path;
  path.full[0] = path.single[0] = &scalar_block<WT>;
  return path;
}

// ---------------------------------------------------------------------------------------------
// AVX2 + FMA path: 8 float lanes; 16 ymm registers hold MR*NR accumulators + NR weight vectors + x.

#define DSPARK_AVX2 __attribute__((target("avx2,fma")))

DSPARK_AVX2 inline __m256 avx2_load8(const float* p) { return _mm256_loadu_ps(p); }
DSPARK_AVX2 inline __m256 avx2_load8(const uint16_t* p) {
  // bf16 -> f32: zero-extend to 32 bits and move into the upper half.
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

template <int MR, int NR, class WT>
DSPARK_AVX2 void avx2_block(const float* x, int64_t ldx, int64_t k, const WT* w, int64_t ldw, float* y,
                            int64_t ldy) {
  __m256 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wv[j] = avx2_load8(w + j * ldw + p);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + p);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      float s = avx2_sum(acc[i][j]);
      for (int64_t q = p; q < k; ++q) s += x[i * ldx + q] * load_f32(w + j * ldw + q);  // k % 8 tail
      y[i * ldy + j] = s;
    }
}

template <class WT>
Path<float, WT> avx2_path() {
  Path<float, WT> path;
  path.mr = 2;
  path.nr = 4;
  path.full[0] = &avx2_block<1, 4, WT>;
  path.full[1] = &avx2_block<2, 4, WT>;
  path.single[0] = &avx2_block<1, 1, WT>;
  path.single[1] = &avx2_block<2, 1, WT>;
  return path;
}

// bf16 weights on AVX2. One row of x (plain decoding) is bound by streaming the weights: the
// generic path (4 weight rows at a time; 8 measured no faster). Several rows (a verify
// chunk, a batch) are bound by the FMAs: each block of 3 weight rows is widened to float once
// into a per-thread buffer that stays in L1, and the rows of x go over it 4 at a time (12
// accumulators, no per-row conversion). Every (x row, weight row) pair is still accumulated by
// avx2_block in the same order, so a row's result does not depend on how many rows come with it.
// Measured (streamed m = 8, k = 512): 1.2x the generic path; with k = 3072 the buffer outgrows
// L1 and it was 0.9-0.97x, so longer rows keep the generic path.
constexpr int64_t kWideBytes = 24 << 10;

DSPARK_AVX2 void widen_bf16_rows(const uint16_t* w, int64_t ldw, int64_t rows, int64_t k, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* src = w + r * ldw;
    float* dst = out + r * k;
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) _mm256_storeu_ps(dst + p, avx2_load8(src + p));
    for (; p < k; ++p) dst[p] = bf16_to_f32(src[p]);
  }
}

void run_avx2_bf16(const float* x, int64_t ldx, int64_t m, int64_t k, const uint16_t* w, int64_t ldw, int64_t n,
                   float* y, int64_t ldy) {
  constexpr int64_t MR = 4, NR = 3;
  if (m == 1 || NR * k * int64_t(sizeof(float)) > kWideBytes) {
    static const Path<float, uint16_t> direct = avx2_path<uint16_t>();
    return run_path(direct, x, ldx, m, k, w, ldw, n, y, ldy);
  }
  static const BlockFn<float, float> full[MR] = {&avx2_block<1, NR, float>, &avx2_block<2, NR, float>,
                                                 &avx2_block<3, NR, float>, &avx2_block<4, NR, float>};
  static const BlockFn<float, float> single[MR] = {&avx2_block<1, 1, float>, &avx2_block<2, 1, float>,
                                                   &avx2_block<3, 1, float>, &avx2_block<4, 1, float>};
  const int64_t blocks = (n + NR - 1) / NR, passes = (m + MR - 1) / MR;
  const int64_t grain = std::max<int64_t>(1, (int64_t(128) << 10) / std::max<int64_t>(1, NR * k * 2 * passes));
  parallel_ranges(blocks, grain, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> wide;  // [NR, k]
    if (int64_t(wide.size()) < NR * k) wide.resize(size_t(NR * k));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t j0 = b * NR, rows = std::min(NR, n - j0);
      widen_bf16_rows(w + j0 * ldw, ldw, rows, k, wide.data());
      for (int64_t i0 = 0; i0 < m; i0 += MR) {
        const int64_t mm = std::min(MR, m - i0);
        const float* xi = x + i0 * ldx;
        float* yi = y + i0 * ldy + j0;
        if (rows == NR) {
          full[mm - 1](xi, ldx, k, wide.data(), k, yi, ldy);
        } else {
          for (int64_t j = 0; j < rows; ++j) single[mm - 1](xi, ldx, k, wide.data() + j * k, k, yi + j, ldy);
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// AVX-512 path: 16 float lanes, masked loads for the k % 16 tail (no out-of-bounds reads).

#define DSPARK_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

DSPARK_AVX512 inline __m512 avx512_load16(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }
DSPARK_AVX512 inline __m512 avx512_load16(const uint16_t* p, __mmask16 mask) {
  // bf16 -> f32: zero-extend to 32 bits and move into the upper half. (maskz_ forms: the plain ones
  // trip GCC 12's -Wmaybe-uninitialized through their _mm512_undefined operand.)
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(mask, wide, 16));
}

// One 16-wide step of k for all MR x NR accumulators (masked for the tail).
template <int MR, int NR, class WT>
DSPARK_AVX512 __attribute__((always_inline)) inline void avx512_step(__m512 (&acc)[MR][NR], const float* x, int64_t ldx,
                                                                     const WT* w, int64_t ldw, int64_t p,
                                                                     __mmask16 mask) {
  __m512 wv[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) wv[j] = avx512_load16(w + j * ldw + p, mask);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * ldx + p);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
  }
}

template <int MR, int NR, class WT>
DSPARK_AVX512 void avx512_block(const float* x, int64_t ldx, int64_t k, const WT* w, int64_t ldw, float* y,
                                int64_t ldy) {
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) avx512_step<MR, NR>(acc, x, ldx, w, ldw, p, __mmask16(0xFFFF));
  if (p < k) avx512_step<MR, NR>(acc, x, ldx, w, ldw, p, __mmask16((1u << (k - p)) - 1));
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = avx512_sum(acc[i][j]);
}

template <class WT>
Path<float, WT> avx512_path() {
  Path<float, WT> path;
  path.mr = 4;
  path.nr = 4;  // 16 accumulators + 4 weight vectors + 1 x vector of the 32 zmm registers
  path.full[0] = &avx512_block<1, 4, WT>;
  path.full[1] = &avx512_block<2, 4, WT>;
  path.full[2] = &avx512_block<3, 4, WT>;
  path.full[3] = &avx512_block<4, 4, WT>;
  path.single[0] = &avx512_block<1, 1, WT>;
  path.single[1] = &avx512_block<2, 1, WT>;
  path.single[2] = &avx512_block<3, 1, WT>;
  path.single[3] = &avx512_block<4, 1, WT>;
  return path;
}

// ---------------------------------------------------------------------------------------------
// AVX-512 BF16 path: vdpbf16ps multiplies 32 bf16 pairs of x and w and adds each pair's sum into
// 16 float lanes. x is converted to bf16 once per call into a buffer of rows padded with zeros to a
// multiple of 32, so only w needs masked loads for the k % 32 tail (masked-off lanes are zero in
// both operands and add nothing).

#define DSPARK_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// One 32-wide step of k for all MR x NR accumulators (w masked for the tail; xb is zero-padded).
template <int MR, int NR>
DSPARK_AVX512BF16 __attribute__((always_inline)) inline void bf16dp_step(__m512 (&acc)[MR][NR], const uint16_t* xb,
                                                                         int64_t ldxb, const uint16_t* w,
                                                                         int64_t ldw, int64_t p, __mmask32 mask) {
  __m512bh wv[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_maskz_loadu_epi16(mask, w + j * ldw + p);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + i * ldxb + p);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
  }
}

// Prefetching the next weight blocks helps when several x rows share them (m = 8: 125 -> 92 us
// streamed, bench/matmul_bench.cpp); 1 to 4 blocks ahead measured alike within noise.
constexpr int64_t kPrefetchBlocks = 2;
template <int MR, int NR>
DSPARK_AVX512BF16 void bf16dp_block(const uint16_t* xb, int64_t ldxb, int64_t k, const uint16_t* w,
                                    int64_t ldw, float* y, int64_t ldy) {
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t p = 0;
  const uint16_t* ahead = w + kPrefetchBlocks * NR * ldw;
  for (; p + 32 <= k; p += 32) {
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(ahead + j * ldw + p), _MM_HINT_T0);
    bf16dp_step<MR, NR>(acc, xb, ldxb, w, ldw, p, __mmask32(0xFFFFFFFFu));
  }
  if (p < k) bf16dp_step<MR, NR>(acc, xb, ldxb, w, ldw, p, __mmask32((1u << (k - p)) - 1));
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = avx512_sum(acc[i][j]);
}

Path<uint16_t, uint16_t> bf16dp_path() {
  Path<uint16_t, uint16_t> path;
  path.mr = 4;
  path.nr = 4;
  path.full[0] = &bf16dp_block<1, 4>;
  path.full[1] = &bf16dp_block<2, 4>;
  path.full[2] = &bf16dp_block<3, 4>;
  path.full[3] = &bf16dp_block<4, 4>;
  path.single[0] = &bf16dp_block<1, 1>;
  path.single[1] = &bf16dp_block<2, 1>;
  path.single[2] = &bf16dp_block<3, 1>;
  path.single[3] = &bf16dp_block<4, 1>;
  return path;
}

// x [m, k] (row stride ldx) -> bf16, round to nearest even, rows of ldxb >= round_up(k, 32) with a
// zero tail.
DSPARK_AVX512BF16 void convert_rows_to_bf16(const float* x, int64_t ldx, int64_t m, int64_t k, uint16_t* xb,
                                            int64_t ldxb) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < ldxb; p += 16) {
      const __mmask16 mask = p + 16 <= k ? __mmask16(0xFFFF) : p < k ? __mmask16((1u << (k - p)) - 1) : 0;
      const __m512 v = _mm512_maskz_loadu_ps(mask, x + i * ldx + p);
      const __m256bh b = _mm512_cvtneps_pbh(v);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xb + i * ldxb + p), (__m256i)b);
    }
  }
}

void run_bf16dp(const float* x, int64_t ldx, int64_t m, int64_t k, const uint16_t* w, int64_t ldw, int64_t n,
                float* y, int64_t ldy) {
  static const Path<uint16_t, uint16_t> path = bf16dp_path();
  // Reused per calling thread: [m, round_up(k, 32)] bf16, at most a few hundred KiB.
  thread_local std::vector<uint16_t> buffer;
  const int64_t ldxb = (k + 31) / 32 * 32;
  if (buffer.size() < size_t(m * ldxb)) buffer.resize(size_t(m * ldxb));
  convert_rows_to_bf16(x, ldx, m, k, buffer.data(), ldxb);
  run_path(path, buffer.data(), ldxb, m, k, w, ldw, n, y, ldy);
}

// ---------------------------------------------------------------------------------------------

void check_args(const char* what, int64_t ldx, int64_t m, int64_t k, int64_t ldw, int64_t n, int64_t ldy) {
  if (m < 0 || k < 0 || n < 0 || ldx < k || ldw < k || ldy < n)
    throw std::invalid_argument(std::string(what) + ": bad sizes or strides");
}

Isa require(Isa isa) {
  if (!isa_supported(isa)) throw std::invalid_argument(std::string("CPU lacks ISA path ") + isa_name(isa));
  return isa;
}

void zero_output(int64_t m, int64_t n, float* y, int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) std::fill(y + i * ldy, y + i * ldy + n, 0.0f);
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512bf16";
    case Isa::Amx: return "amx";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl");
  static const bool avx512bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return avx2;
    case Isa::Avx512: return avx512;
    case Isa::Avx512Bf16: return avx512bf16;
    case Isa::Amx: return avx512bf16 && amx_usable();
  }
  return false;
}

Isa best_isa() {
  static const Isa best = [] {
    if (const char* name = std::getenv("DSPARK_ISA"))
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16, Isa::Amx})
        if (name == std::string(isa_name(isa)) && isa_supported(isa)) return isa;
    return isa_supported(Isa::Amx)          ? Isa::Amx
           : isa_supported(Isa::Avx512Bf16) ? Isa::Avx512Bf16
           : isa_supported(Isa::Avx512)     ? Isa::Avx512
           : isa_supported(Isa::Avx2)       ? Isa::Avx2
                                            : Isa::Scalar;
  }();
  return best;
}

void matmul_bf16_with(Isa isa, const float* x, int64_t ldx, int64_t m, int64_t k, const uint16_t* w,
                      int64_t ldw, int64_t n, float* y, int64_t ldy) {
  check_args("matmul_bf16", ldx, m, k, ldw, n, ldy);
  require(isa);
  if (m == 0 || n == 0) return;
  if (k == 0) return zero_output(m, n, y, ldy);
  switch (isa) {
    case Isa::Amx:
      if (amx_shape_ok(k, n)) {
        const int64_t rows = amx_rows(n);
        matmul_bf16_amx(x, ldx, m, k, w, ldw, n, y, ldy);
        if (rows < n) run_bf16dp(x, ldx, m, k, w + rows * ldw, ldw, n - rows, y + rows, ldy);
        return;
      }
      return run_bf16dp(x, ldx, m, k, w, ldw, n, y, ldy);
    case Isa::Avx512Bf16: return run_bf16dp(x, ldx, m, k, w, ldw, n, y, ldy);
    case Isa::Avx512: {
      static const Path<float, uint16_t> path = avx512_path<uint16_t>();
      return run_path(path, x, ldx, m, k, w, ldw, n, y, ldy);
    }
    case Isa::Avx2: return run_avx2_bf16(x, ldx, m, k, w, ldw, n, y, ldy);
    case Isa::Scalar: {
      static const Path<float, uint16_t> path = scalar_path<uint16_t>();
      return run_path(path, x, ldx, m, k, w, ldw, n, y, ldy);
    }
  }
}

void matmul_f32_with(Isa isa, const float* x, int64_t ldx, int64_t m, int64_t k, const float* w, int64_t ldw,
                     int64_t n, float* y, int64_t ldy) {
  check_args("matmul_f32", ldx, m, k, ldw, n, ldy);
  require(isa);
  if (m == 0 || n == 0) return;
  if (k == 0) return zero_output(m, n, y, ldy);
  switch (isa) {
    case Isa::Amx:
    case Isa::Avx512Bf16:
    case Isa::Avx512: {
      static const Path<float, float> path = avx512_path<float>();
      return run_path(path, x, ldx, m, k, w, ldw, n, y, ldy);
    }
    case Isa::Avx2: {
      static const Path<float, float> path = avx2_path<float>();
      return run_path(path, x, ldx, m, k, w, ldw, n, y, ldy);
    }
    case Isa::Scalar: {
      static const Path<float, float> path = scalar_path<float>();
      return run_path(path, x, ldx, m, k, w, ldw, n, y, ldy);
    }
  }
}

void matmul_bf16(const float* x, int64_t ldx, int64_t m, int64_t k, const uint16_t* w, int64_t ldw, int64_t n,
                 float* y, int64_t ldy) {
  matmul_bf16_with(best_isa(), x, ldx, m, k, w, ldw, n, y, ldy);
}

void matmul_f32(const float* x, int64_t ldx, int64_t m, int64_t k, const float* w, int64_t ldw, int64_t n,
                float* y, int64_t ldy) {
  matmul_f32_with(best_isa(), x, ldx, m, k, w, ldw, n, y, ldy);
}

}  // namespace dspark::kernels
