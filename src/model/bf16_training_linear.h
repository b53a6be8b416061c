// Mixed-precision linear layer for training on CPUs with AMX: float32 master weights and
// activations, bf16 matrix products accumulated in float32 (kernels/matmul_amx.h), in the forward
// pass and in both products of the backward pass:
//   y  [M, N] = bf16(x) bf16(w)^T
//   dx [M, K] = bf16(dy) bf16(w)
//   dw [N, K] = bf16(dy)^T bf16(x)
// The rounding is that of bf16 autocast in PyTorch; optimizer state and weights stay float32.
// LibTorch 1.13's own bf16 GEMM on CPU is slower than its float32 one, and float32 runs through
// OpenBLAS at a tenth of what the tiles do (docs/BENCHMARKS.md, "Training throughput").
#pragma once
#include <ATen/Tensor.h>

#include <cstdint>

namespace dspark {

// Whether this CPU runs the bf16 tile kernels (else the caller keeps float32 at::linear).
bool bf16_training_linear_available();

// Sizes the tiles take without padding: rows of x (M), K and N multiples of 32.
bool bf16_training_linear_fits(int64_t rows, int64_t k, int64_t n);

// x [..., K] float32, w [N, K] float32 (requires_grad as usual) -> [..., N] float32, with autograd.
at::Tensor bf16_training_linear(const at::Tensor& x, const at::Tensor& w);

}  // namespace dspark
