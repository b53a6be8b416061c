// Element-wise activations whose result for an element depends on that element alone.
//
// LibTorch's vectorised SiLU / GELU compute an element differently depending on where it falls in
// the tensor (vector lanes vs scalar tails, small-tensor paths; seen with LibTorch 2.x), so a row
// could get other bits when it shares a forward with other sequences. These loops apply the same
// scalar formula to every element, which keeps the forward row-invariant (model/ops.h).
#pragma once
#include <cstdint>

namespace dspark::kernels {

// y[i] = x[i] / (1 + exp(-x[i])), i < n.
void silu_f32(const float* x, float* y, int64_t n);
// y[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), i < n.
void gelu_tanh_f32(const float* x, float* y, int64_t n);

}  // namespace dspark::kernels
