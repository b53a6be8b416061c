// Tensor operations shared by the target model and the drafters (LibTorch, autograd-friendly).
#pragma once
#include <ATen/Tensor.h>

#include "model/config.h"

namespace dspark {

// RMSNorm over the last dim, computed in float32. Llama/Qwen: w * normed (cast back first);
// Gemma (`gemma`): normed * (1 + w) in float32, then cast, the order HF uses.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, bool gemma = false);

// y = x w^T + b for x [..., k], w [n, k], b [n]. A few rows on CPU without autograd go to the
// decoding kernels (kernels/matmul); everything else to at::linear.
at::Tensor dense(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {});

// False when DSPARK_DISABLE_KERNELS=1: every operation then takes the LibTorch path (A/B checks).
bool cpu_fast_paths_enabled();

at::Tensor activation(const at::Tensor& x, Activation kind);
at::Tensor softcap(const at::Tensor& x, double cap);  // tanh(x / cap) * cap

}  // namespace dspark
