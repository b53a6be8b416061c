// Row kernels of the drafter loss: the L1 distance between the drafter's distribution p and the
// target's t, and the joint gradient of cross-entropy and L1 with respect to the logits. LibTorch
// spells this as about a dozen full [rows, V] passes (log_softmax, exp, sub, abs, sum and their
// backwards, a scatter for the CE label); here it is one pass forward and one backward.
#pragma once

#include <cstdint>

namespace dspark::kernels {

// p, t: [rows, V] probabilities. Per row r: l1[r] = sum_i |p_i - t_i| and
// sign_dot[r] = sum_i p_i * sign(p_i - t_i) (the term the L1 gradient needs; sign(0) = 0).
void l1_rows(const float* p, const float* t, int64_t rows, int64_t V, float* l1, float* sign_dot);

// Gradient of sum_r (g_ce[r] * CE_r + g_l1[r] * L1_r) with respect to the logits z (p = softmax z):
//   dz_i = g_ce[r] * (p_i - [i == label_r]) + g_l1[r] * p_i * (sign(p_i - t_i) - sign_dot[r]).
// labels: [rows] in [0, V). grad: [rows, V].
void ce_l1_rows_backward(const float* p, const float* t, const int64_t* labels, const float* sign_dot,
                         const float* g_ce, const float* g_l1, int64_t rows, int64_t V, float* grad);

}  // namespace dspark::kernels
