// The CPU default for bf16 checkpoints: bf16 matrices (mapped as stored) with float32 activations.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "drafter/dspark_drafter.h"
#include "generation/autoregressive.h"
#include "io/atomic_file.h"
#include "model/weights.h"
#include "spec/dspark_source.h"
#include "spec/ngram_drafter.h"
#include "spec/speculative.h"
#include "support/tiny_models.h"

namespace dspark {
namespace {

std::string bf16_checkpoint(const std::string& kind) {
  const std::string dir = testing::temp_dir("mixed-" + kind);
  ModelConfig config = parse_model_config(testing::tiny_config_json(kind), kind);
  ModelWeights weights = random_weights(config, torch::kFloat32, 4);
  save_weights(weights, dir, torch::kBFloat16);
  io::write_text_atomic(dir + "/config.json", testing::tiny_config_json(kind));
  return dir;
}

TEST(MixedWeights, MatricesStayBf16AndLogitsMatchFloat32) {
  for (const std::string& kind : testing::all_tiny_kinds()) {
    const std::string dir = bf16_checkpoint(kind);
    auto mixed = Transformer::load(dir);  // auto on CPU
    auto f32 = Transformer::load(dir, LoadOptions{"f32"});
    EXPECT_EQ(mixed->dtype(), torch::kFloat32) << kind;
    EXPECT_EQ(mixed->weights().layers[0].q_proj.scalar_type(), torch::kBFloat16) << kind;
    EXPECT_EQ(mixed->weights().final_norm.scalar_type(), torch::kFloat32) << kind;
    const std::vector<int64_t> prompt = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43, 38, 32, 79, 50, 28, 84, 19};
    for (size_t chunk : {size_t(1), size_t(4), prompt.size()}) {  // kernel rows and LibTorch rows
      KVCache ca = mixed->new_cache(), cb = f32->new_cache();
      at::Tensor la, lb;
      for (size_t i = 0; i < prompt.size(); i += chunk) {
        std::vector<int64_t> part(prompt.begin() + i, prompt.begin() + std::min(prompt.size(), i + chunk));
        la = mixed->forward(ca, part, LogitsAt::Last).logits;
        lb = f32->forward(cb, part, LogitsAt::Last).logits;
      }
      // The bf16 dot products round activations to bf16 (relative 2^-8 per product).
      const double scale = lb.abs().max().item<double>();
      EXPECT_LE((la - lb).abs().max().item<double>(), 0.06 * std::max(1.0, scale)) << kind << " chunk " << chunk;
    }
  }
}

TEST(MixedWeights, SpeculativeGreedyEqualsPlainGreedy) {
  auto target = Transformer::load(bf16_checkpoint("qwen3"));
  auto dspark = std::make_shared<DSparkDrafter>(testing::tiny_drafter_config(4), TargetIdentity::of(*target), 3);
  const std::vector<int64_t> prompt = {5, 17, 17, 40, 2, 9};
  GenerationResult plain = generate_autoregressive(*target, prompt, 24, SamplingParams{}, {});
  DSparkSource dspark_source(dspark, *target);
  NgramDrafter ngram;
  for (Drafter* drafter : std::vector<Drafter*>{&dspark_source, &ngram}) {
    SpecOptions o;
    o.max_new_tokens = 24;
    o.gamma = 4;
    EXPECT_EQ(generate_speculative(*target, drafter, prompt, o).tokens, plain.tokens) << drafter->name();
  }
}

}  // namespace
}  // namespace dspark
