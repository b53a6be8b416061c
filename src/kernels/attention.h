// Causal attention of a few new queries over a KV cache, for decoding on the CPU (float32).
//
//   out[t, h, :] = sum_s p[t, h, s] v[h / group, s, :],
//   p[t, h, :]   = softmax_s(cap(scale * q[t, h, :] . k[h / group, s, :]))  over visible keys s:
//                  s <= position0 + t, and s > position0 + t - window when window > 0,
// with cap(x) = softcap * tanh(x / softcap) when softcap > 0 (Gemma 2), else x.
//
// LibTorch needs ~20 operators for this (views, copies, mask, softmax), whose dispatch overhead
// dominates at decode sizes; this is one pass, threads over heads.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"  // Isa

namespace dspark::kernels {

struct AttentionShape {
  int64_t tokens = 1;      // T new queries, at positions position0 .. position0 + T - 1
  int64_t heads = 1;       // query heads
  int64_t kv_heads = 1;    // key/value heads (heads % kv_heads == 0)
  int64_t head_dim = 64;   // D
  int64_t keys = 1;        // S cached keys (incl. the T new ones), S >= position0 + T
  int64_t position0 = 0;
  int64_t window = 0;      // sliding window (0: none)
  float scale = 1.0f;
  float softcap = 0.0f;    // 0: none
};

// q: [T, heads, D] contiguous. k, v: per kv head a block of rows of D floats, row s of kv head j
// at k + j * kv_head_stride + s * D. out: [T, heads, D] contiguous.
void attention_f32(const AttentionShape& shape, const float* q, const float* k, const float* v,
                   int64_t kv_head_stride, float* out);
// The same through one ISA path (best_isa() above; tests and benchmarks compare them). Throws
// std::invalid_argument when this CPU lacks it.
void attention_f32_with(Isa isa, const AttentionShape& shape, const float* q, const float* k, const float* v,
                        int64_t kv_head_stride, float* out);

// The inner loops, vectorised where the CPU can: sum_i a[i] b[i], and y[i] += w x[i].
float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float w, const float* x, float* y, int64_t n);

}  // namespace dspark::kernels
