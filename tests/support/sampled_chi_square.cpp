#include "support/sampled_chi_square.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "spec/speculative.h"

namespace dspark::testing {

ChiSquare first_two_tokens_chi_square(Transformer& target, const std::function<std::unique_ptr<Drafter>()>& make_drafter,
                                      const std::vector<int64_t>& prompt, int64_t draws, int64_t gamma) {
  torch::NoGradGuard no_grad;
  const int64_t V = target.config().vocab_size;
  auto probs = [&](const std::vector<int64_t>& tokens) {
    KVCache cache = target.new_cache();
    return torch::softmax(target.forward(cache, tokens).logits[0], -1);  // [V]
  };
  const at::Tensor p1 = probs(prompt);
  std::map<std::pair<int64_t, int64_t>, double> expected;
  for (int64_t a = 0; a < V; ++a) {
    const double pa = p1[a].item<double>();
    if (pa * double(draws) < 1.0) continue;  // too rare to matter: pooled below
    std::vector<int64_t> longer = prompt;
    longer.push_back(a);
    const at::Tensor p2 = probs(longer);
    for (int64_t b = 0; b < V; ++b) expected[{a, b}] = double(draws) * pa * p2[b].item<double>();
  }
  ChiSquare out;
  std::map<std::pair<int64_t, int64_t>, int64_t> counts;
  for (int64_t d = 0; d < draws; ++d) {
    auto drafter = make_drafter();
    SpecOptions o;
    o.max_new_tokens = 4;  // the first token comes from the prefill, the second from a verify step
    o.gamma = gamma;
    o.sampling.temperature = 1.0;
    o.sampling.seed = uint64_t(d);
    SpecResult r = generate_speculative(target, drafter.get(), prompt, o);
    if (r.tokens.size() < 2) {
      ADD_FAILURE() << "draw " << d << " emitted " << r.tokens.size() << " tokens";
      continue;
    }
    ++counts[{r.tokens[0], r.tokens[1]}];
    out.accepted += r.stats.n_accepted;
  }
  double pooled_expected = double(draws), kept_cells = 0;
  int64_t pooled_count = draws;
  for (const auto& [cell, e] : expected) {
    if (e < 5.0) continue;
    const double n = double(counts.count(cell) ? counts.at(cell) : 0);
    out.chi2 += (n - e) * (n - e) / e;
    pooled_expected -= e;
    pooled_count -= int64_t(n);
    ++kept_cells;
  }
  EXPECT_GE(kept_cells, 5) << "too few cells for a chi-square test";
  if (pooled_expected >= 5.0)
    out.chi2 += (double(pooled_count) - pooled_expected) * (double(pooled_count) - pooled_expected) / pooled_expected;
  else
    --kept_cells;  // no pooled cell
  // 0.001 critical value of chi-square with `df` degrees of freedom (Wilson-Hilferty).
  const double df = kept_cells, z = 3.09;
  out.df = df;
  out.critical = df * std::pow(1.0 - 2.0 / (9.0 * df) + z * std::sqrt(2.0 / (9.0 * df)), 3.0);
  return out;
}

}  // namespace dspark::testing
