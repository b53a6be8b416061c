// Speculative decoding is lossless: greedy output equals plain greedy decoding for every drafter
// and verify mode; sampled verification emits tokens distributed exactly as the target's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "drafter/dspark_drafter.h"
#include "generation/autoregressive.h"
#include "spec/dspark_source.h"
#include "spec/model_drafter.h"
#include "spec/ngram_drafter.h"
#include "spec/speculative.h"
#include "support/tiny_models.h"

namespace dspark {
namespace {

// Proposes a fixed continuation (e.g. the true greedy output), optionally corrupting one position.
class ScriptedDrafter : public Drafter {
 public:
  ScriptedDrafter(std::vector<int64_t> script, int64_t corrupt_every) : script_(std::move(script)), corrupt_(corrupt_every) {}
  std::string name() const override { return "scripted"; }
  void begin(const std::vector<int64_t>&, const ChunkOutput&) override { pos_ = 0; }
  DraftProposal propose(int64_t, int64_t n, const SamplingParams&, Rng&) override {
    DraftProposal p;
    // pos_ = index in script of the token after the anchor.
    for (int64_t k = 0; k < n && pos_ + 1 + k < int64_t(script_.size()); ++k) {
      int64_t t = script_[size_t(pos_ + 1 + k)];
      if (corrupt_ > 0 && (pos_ + k) % corrupt_ == corrupt_ - 1) t = (t + 1) % 97;
      p.tokens.push_back(t);
    }
    return p;
  }
  void commit(const std::vector<int64_t>& kept, const ChunkOutput&) override { pos_ += int64_t(kept.size()); }

 private:
  std::vector<int64_t> script_;
  int64_t corrupt_;
  int64_t pos_ = 0;
};

TEST(Speculative, GreedyOutputEqualsPlainDecodingForEveryDrafterAndMode) {
  auto target = testing::tiny_model("qwen3", torch::kFloat32, 5);
  auto dspark = std::make_shared<DSparkDrafter>(testing::tiny_drafter_config(4), TargetIdentity::of(*target), 3);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : dspark->named_parameters())
      if (name.rfind("markov.", 0) == 0 || name.rfind("conf.", 0) == 0) t.copy_(torch::randn_like(t));
  }
  std::shared_ptr<Transformer> small = testing::tiny_model("llama3", torch::kFloat32, 8);
  torch::manual_seed(21);
  int checked = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t plen = 1 + trial * 3;
    at::Tensor p = torch::randint(0, 97, {plen}, torch::kInt64);
    std::vector<int64_t> prompt(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + plen);
    const int64_t max_new = 5 + trial * 7;
    GenerationResult reference = generate_autoregressive(*target, prompt, max_new, SamplingParams{}, {});
    std::vector<std::vector<int64_t>> eos_sets = {{}};
    if (reference.tokens.size() > 4) eos_sets.push_back({reference.tokens[3]});  // hits EOS early
    for (const auto& eos : eos_sets) {
      GenerationResult ref = generate_autoregressive(*target, prompt, max_new, SamplingParams{}, eos);
      std::vector<int64_t> full = {prompt.back()};
      full.insert(full.end(), ref.tokens.begin(), ref.tokens.end());
      // The scripted drafter's script starts at the first anchor (the first generated token).
      std::vector<int64_t> script(ref.tokens.begin(), ref.tokens.end());
      std::vector<std::pair<std::string, std::unique_ptr<Drafter>>> drafters;
      drafters.emplace_back("none", nullptr);
      drafters.emplace_back("dspark", std::make_unique<DSparkSource>(dspark, *target));
      drafters.emplace_back("ngram", std::make_unique<NgramDrafter>());
      drafters.emplace_back("model", std::make_unique<ModelDrafter>(small, *target));
      drafters.emplace_back("self", std::make_unique<ModelDrafter>(
                                        std::shared_ptr<Transformer>(testing::tiny_model("qwen3", torch::kFloat32, 5)), *target));
      drafters.emplace_back("oracle", std::make_unique<ScriptedDrafter>(script, 0));
      drafters.emplace_back("half-oracle", std::make_unique<ScriptedDrafter>(script, 3));
      for (auto& [name, drafter] : drafters) {
        for (VerifyMode mode : {VerifyMode::Fixed, VerifyMode::Threshold}) {
          for (int64_t gamma : {1, 3, 4}) {
            SpecOptions o;
            o.max_new_tokens = max_new;
            o.eos_ids = eos;
            o.gamma = gamma;
            o.verify = mode;
            SpecResult r = generate_speculative(*target, drafter.get(), prompt, o);
            EXPECT_EQ(r.tokens, ref.tokens) << name << " gamma " << gamma << " trial " << trial;
            EXPECT_EQ(r.hit_eos, ref.hit_eos) << name;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
}

// The DSpark source adds committed positions to its drafter's context only when it next drafts;
// catch_up() does that work for all but the last commit (what one step of continuous drafting
// adds, left for propose()) and says how many positions it took.
TEST(Speculative, DSparkSourceCatchUpCountsPendingPositions) {
  auto target = testing::tiny_model("qwen3", torch::kFloat32, 5);
  auto dspark = std::make_shared<DSparkDrafter>(testing::tiny_drafter_config(4), TargetIdentity::of(*target), 3);
  DSparkSource source(dspark, *target);
  const std::vector<int64_t> prompt = {5, 17, 42, 8, 77, 3};
  KVCache cache = target->new_cache();
  ChunkOutput prefill = target->forward(cache, prompt, LogitsAt::Last, source.taps());
  source.begin(prompt, prefill);
  EXPECT_EQ(source.catch_up(), 0);  // the prompt is the last (only) commit
  Rng rng(1);
  DraftProposal p = source.propose(9, 3, SamplingParams{}, rng);
  ASSERT_FALSE(p.tokens.empty());
  // Three steps without drafting (1 row each), then one that kept 2 rows.
  int64_t anchor = 9;
  for (int step = 0; step < 3; ++step) {
    const std::vector<int64_t> kept = {anchor};
    source.commit(kept, target->forward(cache, kept, LogitsAt::All, source.taps()));
    anchor = (anchor * 7 + 3) % 97;
  }
  const std::vector<int64_t> kept = {anchor, 11};
  source.commit(kept, target->forward(cache, kept, LogitsAt::All, source.taps()));
  EXPECT_EQ(source.catch_up(), 3);
  EXPECT_EQ(source.catch_up(), 0);
}

TEST(Speculative, OracleDrafterIsFullyAccepted) {
  auto target = testing::tiny_model("llama3", torch::kFloat32, 2);
  std::vector<int64_t> prompt = {5, 6, 7};
  GenerationResult ref = generate_autoregressive(*target, prompt, 30, SamplingParams{}, {});
  ScriptedDrafter oracle(ref.tokens, 0);
  SpecOptions o;
  o.max_new_tokens = 30;
  o.gamma = 4;
  SpecResult r = generate_speculative(*target, &oracle, prompt, o);
  EXPECT_EQ(r.tokens, ref.tokens);
  EXPECT_EQ(r.stats.n_accepted, r.stats.n_drafted);
  // 29 tokens after the first: five steps of 4 drafts + bonus, then 3 drafts + bonus (the -n limit).
  EXPECT_EQ(r.stats.steps, 6);
  EXPECT_NEAR(r.stats.tau(), 29.0 / 6.0, 1e-9);
}

// Sampled verification, context-free setting: position j of the output has target distribution
// p_j; the drafter proposes from q_j != p_j. Simulates the decoding loop (draft n, verify, emit
// accepted + one) and counts the first two emitted tokens' joint distribution.
using Verifier = std::function<SampledVerdict(const at::Tensor&, const std::vector<int64_t>&,
                                              const std::vector<at::Tensor>&, Rng&)>;

double chi_square_of(const Verifier& verify, int64_t draws) {
  const int64_t V = 4, n = 3;
  at::Tensor p = torch::tensor({0.5, 0.2, 0.2, 0.1, 0.1, 0.6, 0.1, 0.2, 0.25, 0.25, 0.25, 0.25, 0.4, 0.3, 0.2, 0.1},
                               torch::kFloat32).view({4, V});
  at::Tensor q = torch::tensor({0.1, 0.1, 0.3, 0.5, 0.7, 0.1, 0.1, 0.1, 0.4, 0.4, 0.1, 0.1, 0.25, 0.25, 0.25, 0.25},
                               torch::kFloat32).view({4, V});
  Rng rng(99);
  std::map<std::pair<int64_t, int64_t>, int64_t> counts;
  for (int64_t d = 0; d < draws; ++d) {
    std::vector<int64_t> out;
    while (out.size() < 2) {
      const int64_t base = int64_t(out.size());  // absolute position of the first draft
      std::vector<int64_t> drafts;
      std::vector<at::Tensor> qs;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t pos = std::min<int64_t>(base + j, 3);
        qs.push_back(q[pos]);
        drafts.push_back(sample_index(q[pos], rng));
      }
      at::Tensor ps = torch::stack({p[std::min<int64_t>(base, 3)], p[std::min<int64_t>(base + 1, 3)],
                                    p[std::min<int64_t>(base + 2, 3)], p[std::min<int64_t>(base + 3, 3)]});
      SampledVerdict v = verify(ps, drafts, qs, rng);
      for (int64_t j = 0; j < v.accepted; ++j) out.push_back(drafts[size_t(j)]);
      out.push_back(v.next_token);
    }
    ++counts[{out[0], out[1]}];
  }
  double chi2 = 0;
  for (int64_t a = 0; a < V; ++a)
    for (int64_t b = 0; b < V; ++b) {
      const double expected = double(draws) * p[0][a].item<double>() * p[1][b].item<double>();
      const double diff = double(counts[{a, b}]) - expected;
      chi2 += diff * diff / expected;
    }
  return chi2;
}

Verifier with_rule(SampledVerify rule) {
  return [rule](const at::Tensor& p, const std::vector<int64_t>& drafts, const std::vector<at::Tensor>& q, Rng& rng) {
    return verify_sampled(p, drafts, q, rng, rule);
  };
}

TEST(Speculative, SampledVerificationMatchesTheTargetDistribution) {
  // 16 cells, 15 degrees of freedom: the 0.001 critical value is 37.70.
  for (SampledVerify rule : {SampledVerify::Token, SampledVerify::Block}) {
    const double chi2 = chi_square_of(with_rule(rule), 100000);
    EXPECT_LT(chi2, 37.70) << "chi-square " << chi2 << (rule == SampledVerify::Block ? " (block)" : " (token)");
  }
}

// The same check where distributions depend on the context (the previous token), which is where
// block verification differs from token verification: p(. | prev) and q(. | prev) over V = 4,
// drafts chained through q, the joint of the first three emitted tokens against the product of
// the target's conditionals. Returns the chi-square over the 64 cells and, via tokens_per_step,
// the mean tokens emitted per verification.
struct ContextSetting {
  at::Tensor p, q;  // [V + 1, V]: row prev (row V: the start)
};

ContextSetting context_setting() {
  const int64_t V = 4;
  at::Tensor p = torch::tensor({0.50, 0.20, 0.20, 0.10, 0.10, 0.60, 0.10, 0.20, 0.25, 0.25, 0.25, 0.25, 0.40, 0.30, 0.20,
                                0.10, 0.05, 0.15, 0.30, 0.50},
                               torch::kFloat32).view({V + 1, V});
  at::Tensor q = torch::tensor({0.40, 0.40, 0.10, 0.10, 0.30, 0.30, 0.30, 0.10, 0.10, 0.60, 0.20, 0.10, 0.25, 0.25, 0.25,
                                0.25, 0.30, 0.30, 0.20, 0.20},
                               torch::kFloat32).view({V + 1, V});
  return {p, q};
}

double chi_square_in_context(const Verifier& verify, int64_t draws, double* tokens_per_step) {
  const int64_t V = 4, n = 3;
  const ContextSetting c = context_setting();
  Rng rng(7);
  std::map<std::vector<int64_t>, int64_t> counts;
  int64_t emitted = 0, steps = 0;
  for (int64_t d = 0; d < draws; ++d) {
    std::vector<int64_t> out;
    while (out.size() < 3) {
      int64_t prev = out.empty() ? V : out.back();
      std::vector<int64_t> drafts;
      std::vector<at::Tensor> qs, ps;
      for (int64_t j = 0; j < n; ++j) {
        qs.push_back(c.q[prev]);
        ps.push_back(c.p[prev]);
        drafts.push_back(sample_index(c.q[prev], rng));
        prev = drafts.back();
      }
      ps.push_back(c.p[prev]);
      SampledVerdict v = verify(torch::stack(ps), drafts, qs, rng);
      for (int64_t j = 0; j < v.accepted; ++j) out.push_back(drafts[size_t(j)]);
      out.push_back(v.next_token);
      emitted += v.accepted + 1;
      ++steps;
    }
    out.resize(3);
    ++counts[out];
  }
  *tokens_per_step = double(emitted) / double(steps);
  double chi2 = 0;
  for (int64_t a = 0; a < V; ++a)
    for (int64_t b = 0; b < V; ++b)
      for (int64_t e = 0; e < V; ++e) {
        const double expected =
            double(draws) * c.p[V][a].item<double>() * c.p[a][b].item<double>() * c.p[b][e].item<double>();
        const double diff = double(counts[{a, b, e}]) - expected;
        chi2 += diff * diff / expected;
      }
  return chi2;
}

TEST(Speculative, BlockVerificationKeepsTheDistributionAndAcceptsMore) {
  // 64 cells, 63 degrees of freedom: the 0.001 critical value is 103.44.
  double token_rate = 0, block_rate = 0;
  const double token_chi2 = chi_square_in_context(with_rule(SampledVerify::Token), 60000, &token_rate);
  const double block_chi2 = chi_square_in_context(with_rule(SampledVerify::Block), 60000, &block_rate);
  EXPECT_LT(token_chi2, 103.44) << "token chi-square " << token_chi2;
  EXPECT_LT(block_chi2, 103.44) << "block chi-square " << block_chi2;
  // Block verification is never worse in expectation; here it emits clearly more per step.
  EXPECT_GT(block_rate, token_rate + 0.02) << "block " << block_rate << " vs token " << token_rate;
}

TEST(Speculative, BlockVerificationWithoutTheWeightedResidualFailsTheSameTest) {
  // Block verification whose correction token comes from the plain residual norm(max(p - q, 0))
  // instead of norm(max(w_tau p - q, 0)) biases the output; the test must see it.
  Verifier broken = [](const at::Tensor& p, const std::vector<int64_t>& drafts, const std::vector<at::Tensor>& q, Rng& rng) {
    // The verdict of block verification, with its next token replaced after a partial block.
    SampledVerdict v = verify_sampled(p, drafts, q, rng, SampledVerify::Block);
    if (v.accepted < int64_t(drafts.size())) {
      const int64_t t = v.accepted;
      at::Tensor residual = (p[t] - q[size_t(t)]).clamp_min(0);
      v.next_token = sample_index(residual, rng);
    }
    return v;
  };
  double rate = 0;
  EXPECT_GT(chi_square_in_context(broken, 200000, &rate), 103.44);
}

TEST(Speculative, BrokenAcceptanceRuleFailsTheSameTest) {
  // Resampling from p instead of norm(max(p - q, 0)) after a rejection biases the output.
  Verifier broken = [](const at::Tensor& p, const std::vector<int64_t>& drafts, const std::vector<at::Tensor>& q, Rng& rng) {
    SampledVerdict v;
    for (size_t j = 0; j < drafts.size(); ++j) {
      const double ratio = p[int64_t(j)][drafts[j]].item<double>() / q[j][drafts[j]].item<double>();
      if (rng.uniform() < std::min(1.0, ratio)) {
        ++v.accepted;
        continue;
      }
      v.next_token = sample_index(p[int64_t(j)], rng);
      return v;
    }
    v.next_token = sample_index(p[int64_t(drafts.size())], rng);
    return v;
  };
  EXPECT_GT(chi_square_of(broken, 100000), 37.70);
}

}  // namespace
}  // namespace dspark
