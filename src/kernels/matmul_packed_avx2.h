// Internal to kernels/matmul_packed*.cpp: the AVX2 + FMA kernel on the packed panel layout.
#pragma once

#include <cstdint>

#include "kernels/matmul_packed.h"

namespace dspark::kernels::detail {

// matmul_bf16_packed for CPUs with AVX2 + FMA; arguments already checked.
void matmul_bf16_packed_avx2(const float* x, int64_t ldx, int64_t m, const PackedBf16& w, float* y, int64_t ldy);

}  // namespace dspark::kernels::detail
