// Internal to kernels/matmul_packed*.cpp: the AVX-512F kernel on the packed panel layout.
#pragma once

#include <cstdint>

#include "kernels/matmul_packed.h"

namespace dspark::kernels::detail {

// matmul_bf16_packed widening the bf16 weights to float32 in zmm registers; arguments already
// checked. Bit for bit the AVX2 kernel's results (the same fma chain per output).
void matmul_bf16_packed_avx512(const float* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y, int64_t ldy);

// Whether vdpbf16ps multiplies fewer bf16 pairs per second than widening the weights and using
// 512-bit FMAs would (measured once on this CPU, on the calling thread): on CPUs that issue
// vdpbf16ps at half the rate of FMAs (measured on an Intel Xeon with AVX512-BF16: 1.3 G/s
// against 5.4 G/s per core) the widening kernel does the multi-row products of a verify
// forward in about half the time.
bool bf16_dot_slower_than_widening();

}  // namespace dspark::kernels::detail
