// Index of the largest float in a row: greedy decoding takes one per position of every verify
// step and every draft block (rows of vocabulary size). A scalar scan is a chain of dependent
// compares (~5 cycles per element); this one keeps 16 (AVX-512) or 8 (AVX2) running maxima.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"  // Isa

namespace dspark::kernels {

struct ArgmaxResult {
  int64_t index = 0;       // the first index of the maximum, as at::argmax for finite rows
  bool all_finite = true;  // false when the row holds a NaN or an infinity
};

// x: n >= 1 floats. NaNs never win (index is then the argmax of the other elements).
ArgmaxResult argmax_f32(const float* x, int64_t n);
// Through the widest path up to `isa` that this CPU has (tests compare the paths).
ArgmaxResult argmax_f32_with(Isa isa, const float* x, int64_t n);

}  // namespace dspark::kernels
