// The DSpark training objective (paper Sec. 3, DeepSpec loss.py), per block position k = 1..g:
//   L = w_ce * CE(p_d, x*) + w_l1 * ||p_d - p_t||_1 + w_bce * BCE(c_k, 1 - 0.5 ||p_d - p_t||_1)
// each term a mean over valid positions weighted by w_k = exp(-(k-1)/decay). The soft label is the
// analytic acceptance probability 1 - TV, with the gradient stopped. DFlash: CE only.
#pragma once
#include <ATen/Tensor.h>

#include <vector>

namespace dspark {

struct DSparkLossWeights {
  double ce = 0.1;
  double l1 = 0.9;
  double bce = 1.0;
  double decay = 4.0;  // position-weight decay d
  // CE label: the data token x* (paper), or the target's own argmax at that position (the token
  // greedy verification accepts; p_t is at hand for the L1 term anyway).
  bool ce_on_target_argmax = false;
  static DSparkLossWeights dflash() { return {1.0, 0.0, 0.0, 4.0, false}; }
};

struct DSparkLoss {
  at::Tensor total;           // scalar, differentiable
  at::Tensor ce, l1, bce;     // scalars (detached), each the weighted mean of its term
  at::Tensor tv;              // [.., g] total variation 0.5 ||p_d - p_t||_1 (detached)
};

// Per position: CE of the label and the L1 distance ||softmax(logits) - target_probs||_1.
// logits, target_probs [.., V]; labels [..] int64 in [0, V). fused: on the CPU, the row kernels
// (kernels/ce_l1_rows) instead of LibTorch operators; both give the same values and gradients.
struct CeL1 {
  at::Tensor ce, l1;  // [..] float32, differentiable with respect to logits
};
CeL1 ce_l1_per_position(const at::Tensor& logits, const at::Tensor& target_probs, const at::Tensor& labels,
                        bool fused);

// w_k = exp(-(k-1)/decay) for k = 1..g. [g] float32.
at::Tensor position_weights(int64_t g, double decay);

// logits [.., g, V] draft logits (U + B); conf_logits [.., g] pre-sigmoid (undefined: no BCE);
// target_probs [.., g, V]; labels [.., g] int64; valid [.., g] bool.
// A drafter with a reduced vocabulary (drafter/draft_vocab.h): logits and target_probs are its Vd
// columns, `target_outside` [.., g] is the target's probability mass outside them and labels are
// draft ids, -1 outside. The drafter's q is 0 outside, so the L1 term (and with it TV, tau and the
// BCE label) adds that mass and is the exact distance of the reduced drafter to p_t; a label outside
// adds 0 to CE (no draft token can match it) and stays in the normaliser.
DSparkLoss dspark_loss(const at::Tensor& logits, const at::Tensor& conf_logits, const at::Tensor& target_probs,
                       const at::Tensor& labels, const at::Tensor& valid, const DSparkLossWeights& weights,
                       const at::Tensor& target_outside = {});

// 1 + sum_k prod_{i<=k} (1 - TV_i), averaged over blocks: the expected accepted length under
// sampling when the drafter's q is proposed to a target with distribution p. tv [.., g]; positions
// past a block's valid length count as rejected.
double tau_probabilistic(const at::Tensor& tv, const at::Tensor& valid);

// The same survival products per position k, averaged over blocks with a valid first position:
// the expected fraction of verify steps whose k-th draft is accepted under sampling. [g] values.
std::vector<double> accept_rate_per_position(const at::Tensor& tv, const at::Tensor& valid);

}  // namespace dspark
