// Interop with the reference implementations: drafters built, saved and run by DeepSeek's DeepSpec
// (`Qwen3DSparkModel`, every Markov kind, with and without the confidence head) and z-lab's
// `DFlashDraftModel`, on a tiny transformers-made Qwen3 target (tests/data/interop, written by
// scripts/gen-interop-goldens.py). Loaded through the converter, the native module must reproduce
// the reference's block logits, Markov walks and confidences; `--to deepspec` and back must be
// bit-identical; malformed or mismatched checkpoints must fail with one line naming file and
// tensor. See docs/interop.md.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "drafter/deepspec_format.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "spec/dspark_source.h"
#include "spec/speculative.h"
#include "support/tiny_models.h"
#include "util/error.h"

namespace dspark {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path interop_dir() { return fs::path(DSPARK_SOURCE_DIR) / "tests/data/interop"; }

// Float32 on both sides over bf16-exact weights: the differences are summation order only
// (~1e-6 measured, docs/interop.md). A wrong convention (slot offset, mask input, norm, GQA head
// mapping, RoPE position, Markov parameterisation) moves logits by 1e-1 or more.
constexpr double kTolerance = 1e-4;

const std::vector<std::string> kDrafters = {"dflash",         "dflash_conf", "vanilla",  "vanilla_conf",
                                            "vanilla_conf_h", "gated_conf",  "rnn_conf", "zlab"};

Transformer& target() {
  static std::unique_ptr<Transformer> model = Transformer::load((interop_dir() / "target").string());
  return *model;
}

at::Tensor copy_tensor(const io::TensorView& view) {
  const auto dtype = view.dtype == io::DType::I64 ? torch::kInt64 : torch::kFloat32;
  return torch::from_blob(const_cast<void*>(view.data), view.shape, torch::TensorOptions().dtype(dtype)).clone();
}

struct Golden {
  io::TensorStore store;
  explicit Golden(const std::string& name)
      : store(io::TensorStore::open((interop_dir() / name / "golden.safetensors").string())) {}
  bool has(int step, const std::string& key) const { return store.contains(fmt::format("step{}.{}", step, key)); }
  at::Tensor get(int step, const std::string& key) const { return copy_tensor(store.get(fmt::format("step{}.{}", step, key))); }
  std::vector<int64_t> tokens(int step, const std::string& key) const {
    at::Tensor t = get(step, key);
    return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
  }
};

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what, double& worst) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const double diff = max_diff(actual, expected);
  worst = std::max(worst, diff);
  EXPECT_TRUE(torch::allclose(actual, expected, kTolerance, kTolerance)) << what << ": max |diff| " << diff;
}

at::Tensor as_tensor(const std::vector<double>& v) { return torch::tensor(v, torch::kFloat64).to(torch::kFloat32); }

class InteropReference : public ::testing::TestWithParam<std::string> {};

TEST_P(InteropReference, DrafterMatchesReferenceOutputs) {
  const std::string name = GetParam();
  const std::string dir = (interop_dir() / name).string();
  const auto layout = detect_hf_drafter(dir);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(*layout, name == "zlab" ? HfDrafterLayout::ZlabDFlash : HfDrafterLayout::DeepSpec);
  HfDrafter read = read_hf_drafter(dir, *layout, target());
  EXPECT_EQ(read.dtype, c10::kBFloat16);
  const Golden golden(name);
  SamplingParams greedy;
  if (read.drafter->uses_packed_projections()) {
    // Decoding through the packed bf16 projections rounds their inputs to bf16: the logits move
    // in their last bits only (verification keeps the output exact either way).
    DSparkDrafter::Context packed_ctx = read.drafter->new_context();
    read.drafter->extend_context(packed_ctx, golden.get(1, "context"));
    const at::Tensor expected = golden.get(1, "greedy_logits");
    DSparkDrafter::Draft walk = read.drafter->draft(target(), packed_ctx, golden.get(1, "anchor").item<int64_t>(),
                                                    expected.size(0), greedy, nullptr);
    EXPECT_TRUE(torch::allclose(walk.logits, expected, 2e-2, 5e-2)) << "packed: max |diff| " << max_diff(walk.logits, expected);
    read.drafter->use_float32_projections();
  }
  const DSparkDrafter& d = *read.drafter;
  double worst = 0;
  DSparkDrafter::Context ctx = d.new_context();
  for (int step = 1; step <= 2; ++step) {
    SCOPED_TRACE(fmt::format("{} step {}", name, step));
    d.extend_context(ctx, golden.get(step, "context"));
    ASSERT_EQ(ctx.length, golden.get(step, "start").item<int64_t>());
    const int64_t anchor = golden.get(step, "anchor").item<int64_t>();
    const int64_t n = golden.get(step, "greedy_logits").size(0);
    ASSERT_EQ(n, d.config().max_drafts());
    DSparkDrafter::Draft walk = d.draft(target(), ctx, anchor, n, greedy, nullptr);
    EXPECT_EQ(walk.tokens, golden.tokens(step, "greedy_tokens"));
    expect_close(walk.logits, golden.get(step, "greedy_logits"), "greedy logits", worst);
    const std::vector<int64_t> forced = golden.tokens(step, "forced_tokens");
    DSparkDrafter::Draft forced_walk = d.draft(target(), ctx, anchor, n, greedy, nullptr, &forced);
    expect_close(forced_walk.logits, golden.get(step, "forced_logits"), "forced logits", worst);
    EXPECT_EQ(golden.has(step, "greedy_conf"), d.config().confidence);
    if (d.config().confidence) {
      expect_close(as_tensor(walk.conf_logits), golden.get(step, "greedy_conf"), "greedy confidence", worst);
      expect_close(as_tensor(forced_walk.conf_logits), golden.get(step, "forced_conf"), "forced confidence", worst);
    }
  }
  // The training forward (LibTorch path, blocks masked to the context before their anchor) on
  // both blocks at once, teacher-forced with the forced sequences.
  if (d.config().sample_from_anchor) {
    torch::NoGradGuard no_grad;
    at::Tensor features = torch::cat({golden.get(1, "context"), golden.get(2, "context")}).unsqueeze(0);
    at::Tensor anchors = torch::stack({golden.get(1, "start"), golden.get(2, "start")}, 1);          // [1, 2]
    at::Tensor anchor_tokens = torch::stack({golden.get(1, "anchor"), golden.get(2, "anchor")}, 1);  // [1, 2]
    std::vector<at::Tensor> prev;
    for (int step = 1; step <= 2; ++step) {
      at::Tensor f = golden.get(step, "forced_tokens");
      prev.push_back(torch::cat({golden.get(step, "anchor"), f.narrow(0, 0, f.size(0) - 1)}));
    }
    DSparkDrafter::TrainOutput out = d.forward_train(target(), features, anchors, anchor_tokens, torch::stack(prev).unsqueeze(0));
    for (int step = 1; step <= 2; ++step) {
      expect_close(out.logits[0][step - 1], golden.get(step, "forced_logits"), "training logits", worst);
      if (d.config().confidence)
        expect_close(out.conf_logits[0][step - 1], golden.get(step, "forced_conf"), "training confidence", worst);
    }
  }
  std::cout << "[ interop  ] " << name << " max |diff| " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(Drafters, InteropReference, ::testing::ValuesIn(kDrafters),
                         [](const auto& info) { return info.param; });

// The context the reference read (transformers' hidden_states[id + 1]) is what the engine's own
// target forward taps.
TEST(Interop, TargetTapsMatchReferenceContext) {
  for (const std::string name : {"vanilla_conf", "zlab"}) {
    HfDrafter read = read_hf_drafter((interop_dir() / name).string(), *detect_hf_drafter((interop_dir() / name).string()), target());
    const Golden golden(name);
    at::Tensor expected = torch::cat({golden.get(1, "context"), golden.get(2, "context")});
    at::Tensor tokens = copy_tensor(golden.store.get("sequence")).unsqueeze(0);
    std::vector<at::Tensor> layer_hidden;
    torch::NoGradGuard no_grad;
    target().forward_full(tokens, read.drafter->taps(), &layer_hidden);
    at::Tensor features = read.drafter->features_from(torch::stack(layer_hidden, 2))[0];
    double worst = 0;
    expect_close(features, expected, name + " context features", worst);
    std::cout << "[ interop  ] " << name << " target taps max |diff| " << worst << "\n";
  }
}

// A DeepSpec directory given to -d runs speculative decoding like a native drafter: the output is
// the target's own greedy output.
TEST(Interop, DeepSpecDrafterDecodesLosslessly) {
  for (const std::string name : {"vanilla_conf", "rnn_conf", "zlab"}) {
    auto drafter = std::shared_ptr<DSparkDrafter>(load_drafter_dir((interop_dir() / name).string(), target()));
    DSparkSource source(drafter, target());
    const std::vector<int64_t> prompt = {5, 17, 99, 3, 42, 8, 77};
    SpecOptions o;
    o.max_new_tokens = 24;
    SpecResult plain = generate_speculative(target(), nullptr, prompt, o);
    SpecResult spec = generate_speculative(target(), &source, prompt, o);
    EXPECT_EQ(spec.tokens, plain.tokens) << name;
    EXPECT_GT(spec.stats.n_drafted, 0) << name;
  }
}

// Tensors of two safetensors stores: the same names, dtypes, shapes and bytes.
void expect_same_tensors(const io::TensorStore& a, const io::TensorStore& b, const std::string& what) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size()) << what;
  for (const auto& [name, va] : a.tensors()) {
    ASSERT_TRUE(b.contains(name)) << what << ": " << name;
    const io::TensorView& vb = b.get(name);
    EXPECT_EQ(va.dtype, vb.dtype) << what << ": " << name;
    EXPECT_EQ(va.shape, vb.shape) << what << ": " << name;
    ASSERT_EQ(va.nbytes, vb.nbytes) << what << ": " << name;
    EXPECT_EQ(std::memcmp(va.data, vb.data, va.nbytes), 0) << what << ": " << name;
  }
}

json read_json(const fs::path& path) { return json::parse(io::read_text_file(path.string())); }

TEST(Interop, ConvertRoundTripsBitIdentically) {
  const std::string tmp = testing::temp_dir("interop-roundtrip");
  for (const std::string name : {"dflash", "vanilla_conf", "vanilla_conf_h", "gated_conf", "rnn_conf"}) {
    SCOPED_TRACE(name);
    const fs::path src = interop_dir() / name, native = fs::path(tmp) / (name + "-native"),
                   ds = fs::path(tmp) / (name + "-deepspec"), native2 = fs::path(tmp) / (name + "-native2");
    HfDrafter read = read_hf_drafter(src.string(), HfDrafterLayout::DeepSpec, target());
    read.drafter->save(native.string(), read.dtype);
    auto reloaded = DSparkDrafter::load(native.string(), target());
    write_deepspec(*reloaded, target(), (interop_dir() / "target").string(), ds.string(), read.dtype, 0);
    // DeepSpec -> native -> DeepSpec: the reference's own tensors, byte for byte, and its keys.
    expect_same_tensors(io::TensorStore::open(src.string()), io::TensorStore::open(ds.string()), "deepspec");
    const json a = read_json(src / "config.json"), b = read_json(ds / "config.json");
    for (const char* key : {"architectures", "block_size", "target_layer_ids", "mask_token_id", "markov_rank",
                            "markov_head_type", "enable_confidence_head", "confidence_head_with_markov",
                            "num_target_layers", "num_hidden_layers", "hidden_size", "num_attention_heads",
                            "num_key_value_heads", "head_dim", "intermediate_size", "rms_norm_eps", "vocab_size",
                            "num_anchors", "tie_word_embeddings", "layer_types"})
      EXPECT_EQ(a.value(key, json()), b.value(key, json())) << key;
    EXPECT_EQ(a["rope_parameters"]["rope_theta"], b["rope_parameters"]["rope_theta"]);
    // native -> DeepSpec -> native: the same drafter.
    HfDrafter again = read_hf_drafter(ds.string(), HfDrafterLayout::DeepSpec, target());
    again.drafter->save(native2.string(), again.dtype);
    expect_same_tensors(io::TensorStore::open(native.string(), "drafter"), io::TensorStore::open(native2.string(), "drafter"),
                        "native");
    EXPECT_EQ(read_json(native / "dspark.json"), read_json(native2 / "dspark.json"));
    EXPECT_EQ(again.drafter->fingerprint(), read.drafter->fingerprint());
  }
  fs::remove_all(tmp);
}

TEST(Interop, LargeDeepSpecCheckpointsAreSharded) {
  const std::string tmp = testing::temp_dir("interop-shards");
  HfDrafter read = read_hf_drafter((interop_dir() / "rnn_conf").string(), HfDrafterLayout::DeepSpec, target());
  write_deepspec(*read.drafter, target(), (interop_dir() / "target").string(), tmp + "/ds", c10::kBFloat16, 30000);
  EXPECT_TRUE(fs::exists(tmp + "/ds/model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(tmp + "/ds/model.safetensors"));
  expect_same_tensors(io::TensorStore::open((interop_dir() / "rnn_conf").string()), io::TensorStore::open(tmp + "/ds"),
                      "sharded");
  HfDrafter again = read_hf_drafter(tmp + "/ds", HfDrafterLayout::DeepSpec, target());
  EXPECT_EQ(again.drafter->fingerprint(), read.drafter->fingerprint());
  fs::remove_all(tmp);
}

TEST(Interop, NativeDrafterWithoutDeepSpecLayoutIsRefused) {
  DSparkDrafter d(testing::tiny_drafter_config(4), TargetIdentity::of(target()), 1);
  const std::string tmp = testing::temp_dir("interop-native");
  try {
    write_deepspec(d, target(), (interop_dir() / "target").string(), tmp, c10::kFloat, 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DeepSpec's layout"), std::string::npos) << e.what();
  }
  fs::remove_all(tmp);
}

// ---- bad input: one clear line naming the file and the key or tensor ----

class InteropBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = testing::temp_dir("interop-bad");
    dir_ = tmp_ + "/drafter";
    fs::create_directories(dir_);
    fs::copy_file(interop_dir() / "vanilla_conf/config.json", dir_ + "/config.json");
    fs::copy_file(interop_dir() / "vanilla_conf/model.safetensors", dir_ + "/model.safetensors");
  }
  void TearDown() override { fs::remove_all(tmp_); }
  void edit_config(const std::function<void(json&)>& edit) {
    json j = read_json(dir_ + "/config.json");
    edit(j);
    io::write_text_atomic(dir_ + "/config.json", j.dump(2));
  }
  // Rewrites model.safetensors through `edit` (name -> tensor; erase to drop, assign to replace).
  void edit_tensors(const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
    std::map<std::string, at::Tensor> tensors;
    {
      const io::TensorStore store = io::TensorStore::open(dir_);
      for (const auto& [name, view] : store.tensors())
        tensors[name] = torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kBFloat16).clone();
    }
    edit(tensors);
    std::vector<io::TensorToWrite> out;
    for (auto& [name, t] : tensors) {
      t = t.to(torch::kBFloat16).contiguous();
      out.push_back({name, io::DType::BF16, t.sizes().vec(), t.data_ptr(), size_t(t.nbytes())});
    }
    io::write_safetensors(dir_ + "/model.safetensors", out);
  }
  // The error message, checked to be one line that names `file` and contains each of `words`.
  void expect_error(const std::string& file, const std::vector<std::string>& words) {
    try {
      read_hf_drafter(dir_, HfDrafterLayout::DeepSpec, target());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find(file), std::string::npos) << what;
      for (const auto& w : words) EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' not in: " << what;
    }
  }
  std::string tmp_, dir_;
};

TEST_F(InteropBadInput, OtherHiddenSize) {
  edit_config([](json& j) { j["hidden_size"] = 64; });
  expect_error("config.json", {"hidden_size", "64", "32"});
}

TEST_F(InteropBadInput, OtherVocabulary) {
  edit_config([](json& j) { j["vocab_size"] = 512; });
  expect_error("config.json", {"vocab_size", "512"});
}

TEST_F(InteropBadInput, LayerIdsBeyondTheTarget) {
  edit_config([](json& j) { j["target_layer_ids"] = {0, 7}; });
  expect_error("config.json", {"target_layer_ids", "7"});
}

TEST_F(InteropBadInput, OtherTargetLayerCount) {
  edit_config([](json& j) { j["num_target_layers"] = 36; });
  expect_error("config.json", {"num_target_layers", "36"});
}

TEST_F(InteropBadInput, UnknownMarkovHeadType) {
  edit_config([](json& j) { j["markov_head_type"] = "lstm"; });
  expect_error("config.json", {"markov_head_type", "lstm"});
}

TEST_F(InteropBadInput, MissingKey) {
  edit_config([](json& j) { j.erase("mask_token_id"); });
  expect_error("config.json", {"mask_token_id"});
}

TEST_F(InteropBadInput, MissingTensor) {
  edit_tensors([](auto& t) { t.erase("markov_head.markov_w2.weight"); });
  expect_error("drafter", {"missing tensor markov_head.markov_w2.weight"});
}

TEST_F(InteropBadInput, WrongShape) {
  edit_tensors([](auto& t) { t["fc.weight"] = torch::zeros({32, 96}); });
  expect_error("model.safetensors", {"fc.weight", "[32, 96]", "[32, 64]"});
}

TEST_F(InteropBadInput, ConfidenceHeadOfAnotherWidth) {
  edit_config([](json& j) { j["confidence_head_with_markov"] = false; });
  expect_error("model.safetensors", {"confidence_head.proj.weight", "[1, 48]", "[1, 32]"});
}

TEST_F(InteropBadInput, EmbeddingOfAnotherTarget) {
  edit_tensors([](auto& t) { t["embed_tokens.weight"] = t["embed_tokens.weight"] + 1; });
  expect_error("model.safetensors", {"embed_tokens.weight", "differs from the target"});
}

TEST_F(InteropBadInput, UnexpectedTensor) {
  edit_tensors([](auto& t) { t["d2t"] = torch::zeros({256}); });
  expect_error("model.safetensors", {"unexpected tensor d2t"});
}

TEST_F(InteropBadInput, CliConvertFailsWithOneLine) {
  edit_config([](json& j) { j["markov_head_type"] = "lstm"; });
  const char* cli = std::getenv("DSPARK_CLI");
  const std::string binary = cli ? cli : std::string(DSPARK_BINARY_DIR) + "/dspark";
  const std::string err = tmp_ + "/stderr";
  const std::string command = binary + " convert --from deepspec " + dir_ + " --target " +
                              (interop_dir() / "target").string() + " --out " + tmp_ + "/out 2>" + err + " >/dev/null";
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  const std::string text = io::read_text_file(err);
  EXPECT_EQ(text.rfind("error: ", 0), 0u) << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1) << text;
  EXPECT_NE(text.find("config.json: unknown markov_head_type 'lstm'"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(tmp_ + "/out"));
}

}  // namespace
}  // namespace dspark
