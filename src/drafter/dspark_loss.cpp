#include "drafter/dspark_loss.h"

#include <torch/torch.h>

namespace dspark {

at::Tensor position_weights(int64_t g, double decay) {
  return torch::exp(-torch::arange(g, torch::kFloat32) / decay);
}

DSparkLoss dspark_loss(const at::Tensor& logits, const at::Tensor& conf_logits, const at::Tensor& target_probs,
                       const at::Tensor& labels, const at::Tensor& valid, const DSparkLossWeights& weights) {
  const int64_t g = logits.size(-2);
  at::Tensor w = position_weights(g, weights.decay).to(logits.device()) * valid.to(torch::kFloat32);  // [.., g]
  at::Tensor norm = w.sum().clamp_min(1e-8);
  auto weighted_mean = [&](const at::Tensor& per_position) { return (per_position * w).sum() / norm; };

  at::Tensor log_p = torch::log_softmax(logits.to(torch::kFloat32), -1);  // [.., g, V]
  at::Tensor safe_labels = labels.masked_fill(valid.logical_not(), 0);
  at::Tensor ce = -log_p.gather(-1, safe_labels.unsqueeze(-1)).squeeze(-1);  // [.., g]
  at::Tensor l1 = (log_p.exp() - target_probs.to(torch::kFloat32)).abs().sum(-1);  // [.., g]

  DSparkLoss out;
  out.tv = (0.5 * l1).detach();
  at::Tensor total = weights.ce * weighted_mean(ce);
  if (weights.l1 != 0) total = total + weights.l1 * weighted_mean(l1);
  at::Tensor bce_mean = torch::zeros({}, logits.options().dtype(torch::kFloat32));
  if (conf_logits.defined() && weights.bce != 0) {
    at::Tensor label = (1.0 - out.tv).clamp(0.0, 1.0);  // stop-gradient soft label
    at::Tensor bce = torch::binary_cross_entropy_with_logits(conf_logits.to(torch::kFloat32), label, {}, {},
                                                             at::Reduction::None);
    bce_mean = weighted_mean(bce);
    total = total + weights.bce * bce_mean;
  }
  out.total = total;
  out.ce = weighted_mean(ce).detach();
  out.l1 = weighted_mean(l1).detach();
  out.bce = bce_mean.detach();
  return out;
}

double tau_probabilistic(const at::Tensor& tv, const at::Tensor& valid) {
  at::Tensor accept = (1.0 - tv.to(torch::kFloat32)) * valid.to(torch::kFloat32);  // [.., g]
  at::Tensor survival = torch::cumprod(accept, -1);
  at::Tensor blocks = survival.reshape({-1, tv.size(-1)});
  if (blocks.size(0) == 0) return 1.0;
  return 1.0 + blocks.sum(-1).mean().item<double>();
}

}  // namespace dspark
