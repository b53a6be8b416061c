// Rotary position embeddings, HF convention (rotate_half over the two halves of head_dim).
#pragma once
#include <ATen/Tensor.h>

#include "model/config.h"

namespace dspark {

// inv_freq[i] = theta^(-2i/D) for i < D/2, float32, with `scaling` applied ("linear": / factor;
// "llama3": long wavelengths / factor, short ones kept, smooth blend in between; "proportional":
// only the first partial_rotary_factor share kept, the rest 0, then / factor).
at::Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling);

// cos and sin tables for `positions` [N] (int64): [N, D] float32 each (the D/2 angles repeated).
std::pair<at::Tensor, at::Tensor> rope_tables(const at::Tensor& inv_freq, const at::Tensor& positions);

// x [N, heads, D] rotated by per-row tables cos/sin [N, D] (cast to x's dtype, as HF does).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace dspark
