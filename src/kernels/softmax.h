// Softmax of float32 rows at a temperature, for sampling: every sampled decoding step turns the
// target's logits into probabilities ([1, V] for plain decoding, [k + 1, V] for a verify of k
// drafts, [V_draft] per draft position), and LibTorch spends tens of microseconds per call on a
// finiteness check, the division and the softmax as separate operators.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"  // Isa

namespace dspark::kernels {

// y[r, :] = softmax(x[r, :] * scale) for r < rows over n >= 1 columns (scale = 1 / temperature).
// Returns false when a row holds a NaN or an infinity (y is then unspecified). Threads over rows
// when the rows are many. AVX-512 and AVX2 + FMA paths only: callers check
// softmax_rows_supported() first and otherwise use LibTorch (whose vectorised softmax beats a
// scalar loop).
bool softmax_rows_f32(const float* x, int64_t rows, int64_t n, float scale, float* y);
bool softmax_rows_supported();
// Through the widest path up to `isa` (Isa::Avx2 or wider) that this CPU has; throws
// std::invalid_argument when there is none (tests compare the paths).
bool softmax_rows_f32_with(Isa isa, const float* x, int64_t rows, int64_t n, float scale, float* y);

}  // namespace dspark::kernels
