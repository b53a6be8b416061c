#include "drafter/dspark_loss.h"

#include <torch/torch.h>

#include "kernels/ce_l1_rows.h"
#include "model/ops.h"

namespace dspark {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// CE and L1 per row for float32 CPU logits, through the row kernels: softmax once (LibTorch,
// vectorised), one pass for L1, one for the joint gradient. Outputs ce [M], l1 [M].
struct FusedCeL1 : public torch::autograd::Function<FusedCeL1> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& target_probs,
                               const at::Tensor& labels) {
    const int64_t M = logits.size(0), V = logits.size(1);
    at::Tensor p = torch::softmax(logits, -1).contiguous();                      // [M, V]
    at::Tensor ce = (torch::logsumexp(logits, -1) - logits.gather(1, labels.unsqueeze(1)).squeeze(1)).contiguous();
    at::Tensor t = target_probs.contiguous();
    at::Tensor l1 = torch::empty({M}, logits.options()), sign_dot = torch::empty({M}, logits.options());
    kernels::l1_rows(p.data_ptr<float>(), t.data_ptr<float>(), M, V, l1.data_ptr<float>(), sign_dot.data_ptr<float>());
    ctx->save_for_backward({p, t, labels, sign_dot});
    return {ce, l1};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &p = saved[0], &t = saved[1], &labels = saved[2], &sign_dot = saved[3];
    const int64_t M = p.size(0), V = p.size(1);
    auto per_row = [&](const at::Tensor& g) {
      return g.defined() ? g.to(torch::kFloat32).contiguous() : torch::zeros({M}, p.options());
    };
    at::Tensor g_ce = per_row(grads[0]), g_l1 = per_row(grads[1]);
    at::Tensor grad = torch::empty({M, V}, p.options());
    kernels::ce_l1_rows_backward(p.data_ptr<float>(), t.data_ptr<float>(), labels.data_ptr<int64_t>(),
                                 sign_dot.data_ptr<float>(), g_ce.data_ptr<float>(), g_l1.data_ptr<float>(), M, V,
                                 grad.data_ptr<float>());
    return {grad, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

CeL1 ce_l1_per_position(const at::Tensor& logits, const at::Tensor& target_probs, const at::Tensor& labels,
                        bool fused) {
  const int64_t V = logits.size(-1);
  at::Tensor z = logits.to(torch::kFloat32);
  at::Tensor t = target_probs.to(torch::kFloat32);
  std::vector<int64_t> shape = labels.sizes().vec();  // [..]
  if (fused && z.device().is_cpu() && t.device().is_cpu()) {
    auto out = FusedCeL1::apply(z.reshape({-1, V}), t.reshape({-1, V}), labels.reshape({-1}).to(torch::kInt64).contiguous());
    return {out[0].view(shape), out[1].view(shape)};
  }
  // Reference: LibTorch operators (any device; the fused path is tested against it).
  at::Tensor log_p = torch::log_softmax(z, -1);  // [.., V]
  at::Tensor ce = -log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1);
  at::Tensor l1 = (log_p.exp() - t).abs().sum(-1);
  return {ce, l1};
}

at::Tensor position_weights(int64_t g, double decay) {
  return torch::exp(-torch::arange(g, torch::kFloat32) / decay);
}

DSparkLoss dspark_loss(const at::Tensor& logits, const at::Tensor& conf_logits, const at::Tensor& target_probs,
                       const at::Tensor& labels, const at::Tensor& valid, const DSparkLossWeights& weights,
                       const at::Tensor& target_outside) {
  const int64_t g = logits.size(-2);
  at::Tensor w = position_weights(g, weights.decay).to(logits.device()) * valid.to(torch::kFloat32);  // [.., g]
  at::Tensor norm = w.sum().clamp_min(1e-8);
  auto weighted_mean = [&](const at::Tensor& per_position) { return (per_position * w).sum() / norm; };

  at::Tensor ce_labels = weights.ce_on_target_argmax ? target_probs.argmax(-1) : labels;
  at::Tensor ce_valid = target_outside.defined() ? valid.logical_and(ce_labels >= 0) : valid;  // [.., g]
  at::Tensor safe_labels = ce_labels.masked_fill(ce_valid.logical_not(), 0);
  auto [ce, l1] = ce_l1_per_position(logits, target_probs, safe_labels, cpu_fast_paths_enabled());  // [.., g]
  if (target_outside.defined()) {
    ce = ce * ce_valid.to(torch::kFloat32);
    l1 = l1 + target_outside.to(torch::kFloat32);  // |0 - p_t| over the tokens outside the draft vocabulary
  }

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

std::vector<double> accept_rate_per_position(const at::Tensor& tv, const at::Tensor& valid) {
  const int64_t g = tv.size(-1);
  at::Tensor accept = (1.0 - tv.to(torch::kFloat32)) * valid.to(torch::kFloat32);
  at::Tensor survival = torch::cumprod(accept, -1).reshape({-1, g});
  at::Tensor blocks = valid.reshape({-1, g}).select(1, 0);
  std::vector<double> out(size_t(g), 0.0);
  const int64_t n = blocks.sum().item<int64_t>();
  if (n == 0) return out;
  at::Tensor mean = survival.index({blocks}).sum(0) / double(n);
  for (int64_t k = 0; k < g; ++k) out[size_t(k)] = mean[k].item<double>();
  return out;
}

}  // namespace dspark
