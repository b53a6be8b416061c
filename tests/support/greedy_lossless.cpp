#include "support/greedy_lossless.h"

#include <gtest/gtest.h>

#include "generation/autoregressive.h"
#include "spec/speculative.h"

namespace dspark::testing {

GreedyLossless expect_greedy_equals_plain(Transformer& target, const std::function<std::unique_ptr<Drafter>()>& make_drafter,
                                          const std::vector<int64_t>& prompt, int64_t max_new,
                                          const std::vector<int64_t>& gammas) {
  GreedyLossless out;
  GenerationResult plain = generate_autoregressive(target, prompt, max_new, SamplingParams{}, {});
  std::vector<std::vector<int64_t>> eos_sets = {{}};
  if (plain.tokens.size() > 4) eos_sets.push_back({plain.tokens[3]});
  for (const auto& eos : eos_sets) {
    GenerationResult ref = generate_autoregressive(target, prompt, max_new, SamplingParams{}, eos);
    for (VerifyMode mode : {VerifyMode::Fixed, VerifyMode::Threshold}) {
      for (int64_t gamma : gammas) {
        auto drafter = make_drafter();
        SpecOptions o;
        o.max_new_tokens = max_new;
        o.eos_ids = eos;
        o.gamma = gamma;
        o.verify = mode;
        SpecResult r = generate_speculative(target, drafter.get(), prompt, o);
        EXPECT_EQ(r.tokens, ref.tokens) << "prompt length " << prompt.size() << ", gamma " << gamma
                                        << (eos.empty() ? "" : ", early EOS");
        EXPECT_EQ(r.hit_eos, ref.hit_eos);
        out.accepted += r.stats.n_accepted;
        ++out.checked;
      }
    }
  }
  return out;
}

}  // namespace dspark::testing
