// The DSpark training objective (paper Sec. 3, DeepSpec loss.py), per block position k = 1..g:
//   L = w_ce * CE(p_d, x*) + w_l1 * ||p_d - p_t||_1 + w_bce * BCE(c_k, 1 - 0.5 ||p_d - p_t||_1)
// each term a mean over valid positions weighted by w_k = exp(-(k-1)/decay). The soft label is the
// analytic acceptance probability 1 - TV, with the gradient stopped. DFlash: CE only.
#pragma once
#include <ATen/Tensor.h>

namespace dspark {

struct DSparkLossWeights {
  double ce = 0.1;
  double l1 = 0.9;
  double bce = 1.0;
  double decay = 4.0;  // position-weight decay d
  static DSparkLossWeights dflash() { return {1.0, 0.0, 0.0, 4.0}; }
};

struct DSparkLoss {
  at::Tensor total;           // scalar, differentiable
  at::Tensor ce, l1, bce;     // scalars (detached), each the weighted mean of its term
  at::Tensor tv;              // [.., g] total variation 0.5 ||p_d - p_t||_1 (detached)
};

// w_k = exp(-(k-1)/decay) for k = 1..g. [g] float32.
at::Tensor position_weights(int64_t g, double decay);

// logits [.., g, V] draft logits (U + B); conf_logits [.., g] pre-sigmoid (undefined: no BCE);
// target_probs [.., g, V]; labels [.., g] int64; valid [.., g] bool.
DSparkLoss dspark_loss(const at::Tensor& logits, const at::Tensor& conf_logits, const at::Tensor& target_probs,
                       const at::Tensor& labels, const at::Tensor& valid, const DSparkLossWeights& weights);

// 1 + sum_k prod_{i<=k} (1 - TV_i), averaged over blocks: the expected accepted length under
// sampling when the drafter's q is proposed to a target with distribution p. tv [.., g]; positions
// past a block's valid length count as rejected.
double tau_probabilistic(const at::Tensor& tv, const at::Tensor& valid);

}  // namespace dspark
