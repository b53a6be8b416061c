// Checkpoints: HF configs parse into the right ModelConfig; weights survive save -> load.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "model/rope.h"
#include "support/tiny_models.h"
#include "util/error.h"

namespace dspark {
namespace {

TEST(ModelConfig, PublicQwen3Config) {
  ModelConfig c = load_model_config(std::string(DSPARK_SOURCE_DIR) + "/configs/qwen3-0.6b.config.json");
  EXPECT_EQ(c.arch, Architecture::Qwen3);
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_dim(), 2048);  // head_dim * heads != hidden_size for Qwen3-0.6B
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 0);
  // The published parameter count of Qwen3-0.6B (tied): 596,049,920.
  EXPECT_EQ(c.parameter_count(), 596049920);
}

TEST(ModelConfig, PublicGemma3Config) {
  ModelConfig c = load_model_config(std::string(DSPARK_SOURCE_DIR) + "/configs/gemma-3-1b.config.json");
  EXPECT_EQ(c.arch, Architecture::Gemma3);
  EXPECT_TRUE(c.gemma_norm && c.scale_embeddings && c.sandwich_norm && c.qk_norm);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_DOUBLE_EQ(c.rope_local_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1000000.0);
  EXPECT_DOUBLE_EQ(c.attn_scale, 1.0 / 16.0);  // query_pre_attn_scalar 256
  // Every sixth layer is global: 5, 11, 17, 23.
  for (int64_t i = 0; i < c.num_layers; ++i) EXPECT_EQ(c.layer_is_sliding[size_t(i)], (i + 1) % 6 != 0) << i;
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(c.activation, Activation::GeluTanh);
}

TEST(ModelConfig, Llama3RopeScalingFollowsTheFormula) {
  RopeScaling s;
  s.type = "llama3";
  s.factor = 8.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = 8192;
  at::Tensor plain = rope_inverse_frequencies(128, 500000.0, RopeScaling{});
  at::Tensor scaled = rope_inverse_frequencies(128, 500000.0, s);
  // Highest frequency (wavelength 2*pi < 8192/4): unchanged. Lowest (wavelength > 8192): / 8.
  EXPECT_FLOAT_EQ(scaled[0].item<float>(), plain[0].item<float>());
  EXPECT_FLOAT_EQ(scaled[63].item<float>(), plain[63].item<float>() / 8.0f);
  // In between, a blend: strictly between freq / 8 and freq.
  for (int64_t i = 0; i < 64; ++i) {
    const double f = plain[i].item<double>(), g = scaled[i].item<double>();
    EXPECT_LE(g, f * (1 + 1e-6));
    EXPECT_GE(g, f / 8.0 * (1 - 1e-6));
  }
}

// transformers >= 5 writes rope_theta and the scaling keys as rope_parameters.
TEST(ModelConfig, RopeParametersOfTransformers5) {
  const std::string base = R"("vocab_size": 16, "hidden_size": 8, "intermediate_size": 16,
      "num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 4)";
  ModelConfig llama = parse_model_config(R"({"architectures": ["LlamaForCausalLM"], )" + base + R"(,
      "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})",
                                         "llama.json");
  EXPECT_DOUBLE_EQ(llama.rope_theta, 500000.0);
  EXPECT_EQ(llama.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(llama.rope_scaling.factor, 8.0);
  EXPECT_EQ(llama.rope_scaling.original_max_position_embeddings, 64);

  ModelConfig gemma = parse_model_config(R"({"architectures": ["Gemma3ForCausalLM"], )" + base + R"(,
      "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"],
      "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})",
                                         "gemma3.json");
  EXPECT_DOUBLE_EQ(gemma.rope_theta, 1000000.0);
  EXPECT_DOUBLE_EQ(gemma.rope_local_theta, 10000.0);
  EXPECT_EQ(gemma.rope_scaling.type, "linear");
  EXPECT_EQ(gemma.layer_is_sliding, (std::vector<bool>{true, false}));
}

TEST(ModelConfig, AttentionBiasCoversOutputProjectionExceptInQwen2) {
  const std::string base = R"("vocab_size": 16, "hidden_size": 8, "intermediate_size": 16,
      "num_hidden_layers": 1, "num_attention_heads": 2, "attention_bias": true)";
  ModelConfig llama = parse_model_config(R"({"architectures": ["LlamaForCausalLM"], )" + base + "}", "llama.json");
  EXPECT_TRUE(llama.qkv_bias && llama.o_bias);
  ModelConfig qwen2 = parse_model_config(R"({"architectures": ["Qwen2ForCausalLM"], )" + base + "}", "qwen2.json");
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias);
  EXPECT_THROW(parse_model_config(R"({"architectures": ["LlamaForCausalLM"], "mlp_bias": true, )" + base + "}",
                                  "llama.json"),
               Error);
}

TEST(ModelConfig, UnsupportedArchitectureAndBadFieldsAreClearErrors) {
  try {
    parse_model_config(R"({"architectures": ["MambaForCausalLM"]})", "cfg.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MambaForCausalLM"), std::string::npos);
  }
  EXPECT_THROW(parse_model_config("{not json", "cfg.json"), Error);
  EXPECT_THROW(parse_model_config(R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 10})", "cfg.json"), Error);
}

// Gemma-4: per-kind head geometry, KV sharing and per-layer embeddings, from the keys released
// checkpoints carry (global_head_dim, num_global_key_value_heads) or from per_layer_config.
TEST(ModelConfig, Gemma4LayerGeometryAndKvSharing) {
  const nlohmann::json base = nlohmann::json::parse(testing::tiny_config_json("gemma4"));
  ModelConfig c = parse_model_config(base.dump(), "gemma4.json");
  EXPECT_EQ(c.arch, Architecture::Gemma4);
  EXPECT_EQ(c.layer_is_sliding, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(c.layer_head_dim, (std::vector<int64_t>{16, 32, 16, 32}));
  EXPECT_EQ(c.layer_kv_heads, (std::vector<int64_t>{2, 1, 2, 1}));
  EXPECT_EQ(c.layer_kv_source, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(c.layer_intermediate, (std::vector<int64_t>{48, 48, 96, 96}));  // double-wide shared layers
  EXPECT_TRUE(c.k_eq_v && c.v_norm && c.layer_scalar && c.qk_norm && c.sandwich_norm && c.norm_scale_f32);
  EXPECT_FALSE(c.gemma_norm);
  EXPECT_DOUBLE_EQ(c.attn_scale, 1.0);
  EXPECT_EQ(c.per_layer_size, 8);
  EXPECT_EQ(c.rope_scaling.type, "proportional");
  EXPECT_DOUBLE_EQ(c.rope_scaling.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rope_local_scaling.type, "none");
  // Proportional RoPE: 4 of the 16 frequencies of a 32-dim head rotate, over exponents of 32.
  at::Tensor inv = rope_inverse_frequencies(32, 1e6, c.rope_scaling);
  EXPECT_NEAR(inv[1].item<double>(), std::pow(1e6, -2.0 / 32.0), 1e-7);
  EXPECT_GT(inv[3].item<double>(), 0.0);
  EXPECT_EQ(inv.narrow(0, 4, 12).abs().sum().item<double>(), 0.0);

  nlohmann::json written = base;  // what transformers 5.25 writes instead of the two keys
  written.erase("global_head_dim");
  written.erase("num_global_key_value_heads");
  written["per_layer_config"] = {{"1", {{"head_dim", 32}, {"num_key_value_heads", 1}}},
                                 {"3", {{"head_dim", 32}, {"num_key_value_heads", 1}}}};
  ModelConfig w = parse_model_config(written.dump(), "gemma4.json");
  EXPECT_EQ(w.layer_head_dim, c.layer_head_dim);
  EXPECT_EQ(w.layer_kv_heads, c.layer_kv_heads);
  EXPECT_EQ(w.parameter_count(), c.parameter_count());
  ModelWeights weights = random_weights(c, torch::kFloat32, 1);
  int64_t stored = 0;
  for (auto& [name, t] : weights.named()) stored += t->numel();
  EXPECT_EQ(stored, c.parameter_count());
}

TEST(ModelConfig, UnsupportedGemma4FeaturesAreOneLineErrors) {
  const nlohmann::json base = nlohmann::json::parse(testing::tiny_config_json("gemma4"));
  auto error_of = [&](const nlohmann::json& patch) -> std::string {
    nlohmann::json j = base;
    j.merge_patch(patch);
    try {
      parse_model_config(j.dump(), "gemma4.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  auto expect_error = [&](const nlohmann::json& patch, const std::string& words) {
    const std::string message = error_of(patch);
    EXPECT_NE(message.find(words), std::string::npos) << patch.dump() << " -> '" << message << "'";
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind("gemma4.json", 0), 0u) << message;
  };
  expect_error({{"enable_moe_block", true}}, "mixture-of-experts");
  expect_error({{"use_bidirectional_attention", "all"}}, "use_bidirectional_attention");
  expect_error({{"num_kv_shared_layers", 4}}, "num_kv_shared_layers");
  expect_error({{"num_kv_shared_layers", 3}}, "no earlier unshared layer");  // layer 1 (full) would be shared too
  expect_error({{"per_layer_config", {{"1", {{"sliding_window", 4}}}}}}, "per_layer_config['1'].sliding_window");
  expect_error({{"per_layer_config", {{"7", {{"head_dim", 32}}}}}}, "not a layer index");
  expect_error({{"per_layer_config", {{"1", {{"head_dim", 32}}}, {"3", {{"head_dim", 64}}}}}}, "differ in head_dim");
  expect_error({{"vocab_size_per_layer_input", 50}}, "vocab_size_per_layer_input");
  expect_error({{"rope_parameters", {{"full_attention", {{"rope_type", "yarn"}}}}}}, "yarn");
  EXPECT_EQ(error_of({{"use_bidirectional_attention", "vision"}}), "");  // text tokens stay causal
}

TEST(Weights, MissingGemma4TensorNamesTheTensor) {
  const std::string dir = testing::temp_dir("weights-gemma4-missing");
  ModelConfig config = parse_model_config(testing::tiny_config_json("gemma4"), "gemma4");
  ModelWeights weights = random_weights(config, torch::kFloat32, 1);
  EXPECT_FALSE(weights.layers[1].v_proj.defined());  // k = v on full layers
  EXPECT_FALSE(weights.layers[2].k_proj.defined());  // KV-shared
  weights.layers[2].per_layer_gate = at::Tensor();   // not written
  save_weights(weights, dir, torch::kFloat32);
  io::write_text_atomic(dir + "/config.json", testing::tiny_config_json("gemma4"));
  try {
    Transformer::load(dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.2.per_layer_input_gate.weight"), std::string::npos) << e.what();
  }
}

class WeightsRoundTrip : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(WeightsRoundTrip, SaveThenLoadGivesTheSameLogits) {
  const auto& [kind, shard_bytes] = GetParam();
  const std::string dir = testing::temp_dir("weights-" + kind);
  ModelConfig config = parse_model_config(testing::tiny_config_json(kind), kind);
  ModelWeights weights = random_weights(config, torch::kBFloat16, 9);
  save_weights(weights, dir, torch::kBFloat16, shard_bytes);
  io::write_text_atomic(dir + "/config.json", testing::tiny_config_json(kind));
  if (shard_bytes > 0) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  }
  ModelWeights loaded = load_weights(config, dir, torch::kBFloat16);
  auto named_a = weights.named(), named_b = loaded.named();
  ASSERT_EQ(named_a.size(), named_b.size());
  for (size_t i = 0; i < named_a.size(); ++i) {
    EXPECT_EQ(named_a[i].first, named_b[i].first);
    EXPECT_TRUE(torch::equal(*named_a[i].second, *named_b[i].second)) << named_a[i].first;
  }
  auto model = Transformer::load(dir, LoadOptions{"bf16"});
  EXPECT_EQ(model->config().arch, config.arch);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, WeightsRoundTrip,
                         ::testing::Combine(::testing::ValuesIn(testing::all_tiny_kinds()),
                                            ::testing::Values(size_t(0), size_t(4096))),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) ? "_sharded" : "_single");
                         });

TEST(Weights, MissingTensorNamesTheTensor) {
  const std::string dir = testing::temp_dir("weights-missing");
  ModelConfig config = parse_model_config(testing::tiny_config_json("qwen3"), "qwen3");
  ModelWeights weights = random_weights(config, torch::kFloat32, 1);
  weights.layers[1].k_norm = at::Tensor();  // not written
  save_weights(weights, dir, torch::kFloat32);
  try {
    load_weights(config, dir, torch::kFloat32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.self_attn.k_norm.weight"), std::string::npos) << e.what();
  }
}

TEST(Weights, WrongShapeIsAClearError) {
  const std::string dir = testing::temp_dir("weights-shape");
  ModelConfig config = parse_model_config(testing::tiny_config_json("qwen3"), "qwen3");
  ModelWeights weights = random_weights(config, torch::kFloat32, 1);
  weights.final_norm = torch::ones({7});
  save_weights(weights, dir, torch::kFloat32);
  EXPECT_THROW(load_weights(config, dir, torch::kFloat32), Error);
}

}  // namespace
}  // namespace dspark
