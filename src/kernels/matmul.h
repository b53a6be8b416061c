// Matrix products for decoding: few activation rows (m = 1..16) against a large weight matrix.
//
//   y[m, n] = x[m, k] * w[n, k]^T      (w row-major [n, k]: the Hugging Face Linear layout)
//
// With m this small the product is bound by reading w once from memory, so the kernels stream w
// exactly once (all m rows are processed while a block of w rows is in L1) and split n across
// threads. LibTorch 1.13 is far from that bound here, especially for bf16 weights.
//
// The interface is plain pointers, sizes and strides (no LibTorch types) so the kernels can be
// tested and benchmarked on raw buffers. Threading uses the same OpenMP team as LibTorch (sized by
// at::set_num_threads).
//
// Numerics: products are accumulated in float32 (in a different order than LibTorch, so results
// differ in the last bits). Isa::Avx512Bf16 and Isa::Amx additionally rounds x to bf16 (round to nearest even)
// because vdpbf16ps multiplies bf16 pairs; when x already holds bf16 values (a bf16 model) that
// rounding is exact. Bounds, with S = sum_k |x[i,k]| |w[j,k]| and u = 2^-24:
//   every path, x bf16-representable:    |y - exact| <= k u S
//   Avx512Bf16 / Amx, arbitrary f32 x:    |y - exact| <= (2^-8 + k u) S
// (vdpbf16ps also flushes bf16 denormals, |v| < 1.2e-38, to zero: negligible next to the above.)
#pragma once

#include <cstdint>

namespace dspark::kernels {

// Instruction-set paths, slowest first. Each one is compiled into the binary (function-level
// target attributes) and chosen at run time, so one build runs on any x86-64 CPU.
enum class Isa {
  Scalar,      // portable C++
  Avx2,        // AVX2 + FMA, 8 float lanes
  Avx512,      // AVX-512 F/BW/VL, 16 float lanes (bf16 weights widened to f32)
  Avx512Bf16,  // AVX-512 BF16: vdpbf16ps on bf16 pairs (bf16 weights only; f32 uses Avx512)
  Amx,         // AMX-BF16 tiles (kernels/matmul_amx.h) for bf16 weights when k % 32 == 0, the
               // leftover n % 16 weight rows and other shapes by Avx512Bf16; f32 uses Avx512
};

const char* isa_name(Isa isa);
// Whether this CPU can run `isa` (Scalar: always).
bool isa_supported(Isa isa);
// The fastest supported path, or the one named by DSPARK_ISA (scalar, avx2, avx512, avx512bf16,
// amx) when this CPU has it: end-to-end before/after comparisons of a kernel.
Isa best_isa();

// y[i * ldy + j] = sum_p x[i * ldx + p] * w[j * ldw + p] for i < m, j < n, p < k.
// w_bf16 holds bfloat16 bit patterns (the upper half of a float32). Requires ldx, ldw >= k and
// ldy >= n; y must not overlap x or w. k == 0 gives zeros. Uses the fastest supported path.
void matmul_bf16(const float* x, int64_t ldx, int64_t m, int64_t k, const uint16_t* w_bf16,
                 int64_t ldw, int64_t n, float* y, int64_t ldy);
void matmul_f32(const float* x, int64_t ldx, int64_t m, int64_t k, const float* w, int64_t ldw,
                int64_t n, float* y, int64_t ldy);

// Contiguous operands: ldx = ldw = k, ldy = n.
inline void matmul_bf16(const float* x, int64_t m, int64_t k, const uint16_t* w_bf16, int64_t n,
                        float* y) {
  matmul_bf16(x, k, m, k, w_bf16, k, n, y, n);
}
inline void matmul_f32(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y) {
  matmul_f32(x, k, m, k, w, k, n, y, n);
}

// A given path (tests, benchmarks). Throws std::invalid_argument when the CPU lacks it.
// matmul_f32_with(Isa::Avx512Bf16, ...) runs the Avx512 path (there is no f32 dot-product insn).
void matmul_bf16_with(Isa isa, const float* x, int64_t ldx, int64_t m, int64_t k,
                      const uint16_t* w_bf16, int64_t ldw, int64_t n, float* y, int64_t ldy);
void matmul_f32_with(Isa isa, const float* x, int64_t ldx, int64_t m, int64_t k, const float* w,
                     int64_t ldw, int64_t n, float* y, int64_t ldy);

}  // namespace dspark::kernels
