// Decode matrix products against bf16 weights packed once at load time (AVX512-BF16, AVX-512F or AVX2 + FMA).
//
//   y[m, n] = x[m, k] * w[n, k]^T
//
// Why a second layout: with the Hugging Face row-major [n, k] layout the row-major kernel
// (kernels/matmul.h) reads 4 weight rows side by side and ends every (x row, weight row) pair
// with a horizontal sum. For the small k of small models (512) that costs a sum per 16 products,
// and the 4 interleaved streams restart at every 4 KiB block, so streaming tops out well below
// the memory bandwidth (bench/matmul_bench.cpp, MatmulStream). Packed, 16 weight rows form a
// panel stored pair-interleaved: one 64-byte load holds k-pair q of all 16 rows, vdpbf16ps adds it
// times a broadcast pair of x into 16 output lanes, and a thread reads its panels as one linear
// stream with no horizontal sums.
//
// Layout: panel p = rows [16p, 16p + 16), [n_panels, kp / 2, 16, 2] bf16 with kp = k rounded up to
// even; padding rows and the padding column are zero.
//
// Numerics: with AVX512-BF16, every output is sum over q in increasing order of one vdpbf16ps
// pair product, accumulated in float32, with x rounded to bf16 (as kernels/matmul.h's Avx512Bf16
// path, whose bounds hold). On AVX-512F and on AVX2 (kernels/matmul_packed_avx512.cpp,
// matmul_packed_avx2.cpp) the same layout is widened in registers and x stays float32: one fma per
// k in increasing order, so these two paths give identical bits. Either way the order does not
// depend on m or on the thread count, so each row's result is the same whatever else is in the
// batch (what model/ops.h RowInvariantScope requires); one process uses one path for every m.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace dspark::kernels {

struct PackedBf16 {
  int64_t n = 0, k = 0;
  std::vector<uint16_t> data;  // [ceil(n / 16), kp / 2, 16, 2]
  // Whether each product reads the matrix from memory (its owner's weights exceed the last-level
  // cache, as a decoding target's do): the kernel then prefetches ahead of the hardware prefetcher.
  // For a matrix that stays in cache (a drafter's) those prefetches only cost issue slots.
  bool streamed = false;
  int64_t kp() const { return (k + 1) / 2 * 2; }
};

// The path the packed kernel takes, fixed for the process:
//   best_isa() Avx512Bf16: Isa::Avx512Bf16, or Isa::Avx512 (widening) where this CPU issues
//     vdpbf16ps too slowly for it to pay (detail::bf16_dot_slower_than_widening, measured once;
//     DSPARK_ISA=avx512bf16 keeps vdpbf16ps);
//   best_isa() Avx512: Isa::Avx512; Avx2: Isa::Avx2;
//   else Isa::Scalar (none: AMX and scalar CPUs keep the row-major kernels).
Isa packed_bf16_isa();
// Whether this CPU runs the packed kernel (packed_bf16_isa() is not Scalar).
bool packed_bf16_supported();

// Packs w [n, k] (bf16 bits, row stride ldw >= k).
PackedBf16 pack_bf16(const uint16_t* w, int64_t ldw, int64_t n, int64_t k);

// y[i * ldy + j] = sum_p x[i * ldx + p] * w[j, p] for i < m, j < w.n. Requires ldx >= w.k, ldy >= w.n
// and packed_bf16_supported() (throws std::invalid_argument otherwise).
void matmul_bf16_packed(const float* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y, int64_t ldy);
// The same through a given path (Isa::Avx512Bf16, Isa::Avx512 or Isa::Avx2; tests and benchmarks
// compare them); throws std::invalid_argument for another path or one this CPU lacks.
void matmul_bf16_packed_with(Isa isa, const float* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y,
                             int64_t ldy);

}  // namespace dspark::kernels
