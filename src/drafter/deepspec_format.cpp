#include "drafter/deepspec_format.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fmt/ranges.h>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "util/error.h"

namespace dspark {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kDeepSpecArch = "Qwen3DSparkModel";
constexpr const char* kZlabArch = "DFlashDraftModel";
constexpr int64_t kDeepSpecAnchors = 512;  // DeepSpec's training-only num_anchors, required by its loader

// Native per-layer name -> DeepSpec per-layer name (both after "layers.{i}.").
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> names = {
      {"attn_norm", "input_layernorm.weight"},   {"q_proj", "self_attn.q_proj.weight"},
      {"k_proj", "self_attn.k_proj.weight"},     {"v_proj", "self_attn.v_proj.weight"},
      {"o_proj", "self_attn.o_proj.weight"},     {"q_norm", "self_attn.q_norm.weight"},
      {"k_norm", "self_attn.k_norm.weight"},     {"ffn_norm", "post_attention_layernorm.weight"},
      {"gate_proj", "mlp.gate_proj.weight"},     {"up_proj", "mlp.up_proj.weight"},
      {"down_proj", "mlp.down_proj.weight"}};
  return names;
}

const std::map<std::string, std::string>& global_names() {
  static const std::map<std::string, std::string> names = {
      {"ctx.proj", "fc.weight"},
      {"ctx.norm", "hidden_norm.weight"},
      {"out.norm", "norm.weight"},
      {"markov.w1", "markov_head.markov_w1.weight"},
      {"markov.w2", "markov_head.markov_w2.weight"},
      {"markov.gate.weight", "markov_head.gate_proj.weight"},
      {"markov.gate.bias", "markov_head.gate_proj.bias"},
      {"markov.rnn.weight", "markov_head.joint_proj.weight"},
      {"markov.rnn.bias", "markov_head.joint_proj.bias"},
      {"conf.weight", "confidence_head.proj.weight"},
      {"conf.bias", "confidence_head.proj.bias"}};
  return names;
}

// A key of a drafter config: `dflash_config.KEY` first, then the top level (vLLM's precedence).
const json* find_key(const json& config, const std::string& key) {
  if (config.contains("dflash_config") && config["dflash_config"].is_object() && config["dflash_config"].contains(key))
    return &config["dflash_config"][key];
  if (config.contains(key) && !config[key].is_null()) return &config[key];
  return nullptr;
}

template <typename T>
T get_key(const json& config, const std::string& key, const std::string& path, std::optional<T> fallback = {}) {
  const json* v = find_key(config, key);
  if (!v) {
    if (fallback) return *fallback;
    fail("{}: missing key {}", path, key);
  }
  try {
    return v->get<T>();
  } catch (const json::exception&) {
    fail("{}: key {} has the wrong type ({})", path, key, v->dump());
  }
}

// z-lab's default: N layers spread from 1 to L-3 (Python's round: half to even).
std::vector<int64_t> zlab_layer_ids(int64_t target_layers, int64_t draft_layers) {
  if (draft_layers == 1) return {target_layers / 2};
  const double start = 1, span = double(target_layers - 3) - start;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < draft_layers; ++i)
    ids.push_back(int64_t(std::nearbyint(start + double(i) * span / double(draft_layers - 1))));
  return ids;
}

double rope_theta_of(const json& config, const std::string& path) {
  if (config.contains("rope_parameters") && config["rope_parameters"].is_object()) {
    const json& rp = config["rope_parameters"];
    const std::string type = rp.value("rope_type", std::string("default"));
    if (type != "default") fail("{}: rope_parameters.rope_type '{}' is not supported for drafters (want default)", path, type);
    if (rp.contains("rope_theta")) return rp["rope_theta"].get<double>();
  }
  if (config.contains("rope_scaling") && !config["rope_scaling"].is_null()) {
    const json& rs = config["rope_scaling"];
    const std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
    if (type != "default") fail("{}: rope_scaling '{}' is not supported for drafters", path, type);
  }
  return config.value("rope_theta", 10000.0);
}

// Compares a stored copy of the target's embedding / head with the target's own, on a sample of
// rows rounded to bf16 (the copies are saved in bf16).
void check_copy(const io::TensorStore& store, const std::string& name, const at::Tensor& target_weight) {
  const io::TensorView& view = store.get(name);
  const std::vector<int64_t> want = target_weight.sizes().vec();
  if (view.shape != want)
    fail("{}: tensor {} has shape [{}], the target's is [{}] (a drafter for another target?)", view.file, name,
         fmt::join(view.shape, ", "), fmt::join(want, ", "));
  const int64_t rows = want[0], stride = std::max<int64_t>(1, rows / 256);
  at::Tensor stored;
  if (view.dtype == io::DType::BF16)
    stored = torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kBFloat16);
  else if (view.dtype == io::DType::F32)
    stored = torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kFloat32);
  else if (view.dtype == io::DType::F16)
    stored = torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kFloat16);
  else
    fail("{}: tensor {} must be F32, BF16 or F16", view.file, name);
  using torch::indexing::Slice;
  auto sample = [&](const at::Tensor& t) {
    return t.index({Slice(0, torch::indexing::None, stride)}).to(torch::kCPU).to(torch::kBFloat16).to(torch::kFloat32);
  };
  if (!sample(stored).equal(sample(target_weight.detach())))
    fail("{}: tensor {} differs from the target's (a drafter for another target?)", view.file, name);
}

}  // namespace

HfDrafterLayout parse_hf_drafter_layout(const std::string& name) {
  if (name == "deepspec") return HfDrafterLayout::DeepSpec;
  if (name == "zlab-dflash") return HfDrafterLayout::ZlabDFlash;
  fail("unknown drafter layout '{}' (want deepspec or zlab-dflash)", name);
}

const char* hf_drafter_layout_name(HfDrafterLayout layout) {
  return layout == HfDrafterLayout::DeepSpec ? "deepspec" : "zlab-dflash";
}

std::string deepspec_name(const std::string& native) {
  static const std::regex layer(R"(layers\.(\d+)\.(\w+))");
  std::smatch m;
  if (std::regex_match(native, m, layer)) {
    auto it = layer_names().find(m[2].str());
    return it == layer_names().end() ? std::string() : "layers." + m[1].str() + "." + it->second;
  }
  auto it = global_names().find(native);
  return it == global_names().end() ? std::string() : it->second;
}

std::optional<HfDrafterLayout> detect_hf_drafter(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / "config.json";
  if (fs::exists(fs::path(dir) / "dspark.json") || !fs::exists(config_path)) return std::nullopt;
  json config = json::parse(io::read_text_file(config_path.string()), nullptr, false);
  if (config.is_discarded() || !config.is_object() || !config.contains("architectures")) return std::nullopt;
  for (const auto& a : config["architectures"]) {
    if (!a.is_string()) continue;
    if (a.get<std::string>() == kDeepSpecArch) return HfDrafterLayout::DeepSpec;
    if (a.get<std::string>() == kZlabArch) return HfDrafterLayout::ZlabDFlash;
  }
  return std::nullopt;
}

HfDrafter read_hf_drafter(const std::string& dir, HfDrafterLayout layout, Transformer& target) {
  if (!fs::is_directory(dir)) fail("drafter directory '{}' does not exist", dir);
  const std::string path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(path)) fail("'{}' is not a Hugging Face drafter directory (no config.json)", dir);
  json config = json::parse(io::read_text_file(path), nullptr, false);
  if (config.is_discarded() || !config.is_object()) fail("{}: not valid JSON", path);
  const ModelConfig& tc = target.config();
  const bool deepspec = layout == HfDrafterLayout::DeepSpec;

  std::vector<std::string> archs;
  if (config.contains("architectures") && config["architectures"].is_array())
    for (const auto& a : config["architectures"])
      if (a.is_string()) archs.push_back(a.get<std::string>());
  const std::string want_arch = deepspec ? kDeepSpecArch : kZlabArch;
  if (std::find(archs.begin(), archs.end(), want_arch) == archs.end())
    fail("{}: architectures [{}] is not a {} drafter (want {})", path, fmt::join(archs, ", "),
         hf_drafter_layout_name(layout), want_arch);

  // Geometry: the drafter's width must be the target's hidden size; the rest is the drafter's.
  const int64_t H = get_key<int64_t>(config, "hidden_size", path);
  const int64_t V = get_key<int64_t>(config, "vocab_size", path);
  if (H != tc.hidden_size) fail("{}: hidden_size {} does not match the target's {}", path, H, tc.hidden_size);
  if (V != tc.vocab_size) fail("{}: vocab_size {} does not match the target's {}", path, V, tc.vocab_size);
  const int64_t num_target_layers = get_key<int64_t>(config, "num_target_layers", path, tc.num_layers);
  if (num_target_layers != tc.num_layers)
    fail("{}: num_target_layers {} does not match the target's {} layers", path, num_target_layers, tc.num_layers);
  if (config.value("hidden_act", std::string("silu")) != "silu")
    fail("{}: hidden_act '{}' is not supported (want silu)", path, config.value("hidden_act", std::string()));
  if (config.value("attention_bias", false)) fail("{}: attention_bias = true is not supported for drafters", path);
  if (config.value("use_sliding_window", false)) fail("{}: sliding-window drafters are not supported", path);
  if (config.contains("layer_types") && config["layer_types"].is_array())
    for (const auto& t : config["layer_types"])
      if (t != "full_attention") fail("{}: layer_types {} is not supported (want full_attention)", path, t.dump());

  DSparkConfig c;
  c.width = H;
  c.target_width = true;
  c.context = ContextMode::Layers;
  c.num_layers = get_key<int64_t>(config, "num_hidden_layers", path);
  c.num_heads = get_key<int64_t>(config, "num_attention_heads", path);
  c.num_kv_heads = get_key<int64_t>(config, "num_key_value_heads", path, c.num_heads);
  c.head_dim = get_key<int64_t>(config, "head_dim", path, c.num_heads > 0 ? H / c.num_heads : 0);
  c.ffn_size = get_key<int64_t>(config, "intermediate_size", path);
  c.rms_norm_eps = get_key<double>(config, "rms_norm_eps", path, 1e-6);
  c.rope_theta = rope_theta_of(config, path);
  c.block_size = get_key<int64_t>(config, "block_size", path);
  c.mask_token_id = get_key<int64_t>(config, "mask_token_id", path);
  if (c.mask_token_id < 0 || c.mask_token_id >= V)
    fail("{}: mask_token_id {} is outside the vocabulary of {}", path, c.mask_token_id, V);
  c.target_layers = deepspec || find_key(config, "target_layer_ids")
                        ? get_key<std::vector<int64_t>>(config, "target_layer_ids", path)
                        : zlab_layer_ids(num_target_layers, c.num_layers);
  if (c.target_layers.empty()) fail("{}: target_layer_ids is empty", path);
  for (size_t i = 0; i < c.target_layers.size(); ++i) {
    const int64_t id = c.target_layers[i];
    if (id == -1) fail("{}: target_layer_ids -1 (the embedding output) is not supported", path);
    if (id < 0 || id >= tc.num_layers - 1)
      fail("{}: target_layer_ids {} is outside the target's layers 0..{} (its last layer is never tapped)", path, id,
           tc.num_layers - 2);
    if (i > 0 && id <= c.target_layers[i - 1]) fail("{}: target_layer_ids must be strictly increasing", path);
  }
  c.sample_from_anchor = deepspec;
  const int64_t rank = deepspec ? get_key<int64_t>(config, "markov_rank", path, 0) : 0;
  if (rank < 0) fail("{}: markov_rank {} must be >= 0", path, rank);
  c.markov_rank = rank;
  c.markov = MarkovKind::None;
  if (rank > 0) {
    const std::string type = get_key<std::string>(config, "markov_head_type", path);
    if (type != "vanilla" && type != "gated" && type != "rnn")
      fail("{}: unknown markov_head_type '{}' (want vanilla, gated or rnn)", path, type);
    c.markov = parse_markov_kind(type);
  }
  c.confidence = deepspec && get_key<bool>(config, "enable_confidence_head", path, false);
  c.confidence_with_markov = c.confidence && get_key<bool>(config, "confidence_head_with_markov", path, rank > 0);
  if (c.confidence_with_markov && rank == 0)
    fail("{}: confidence_head_with_markov needs a Markov head (markov_rank > 0)", path);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }

  const io::TensorStore store = io::TensorStore::open(dir);
  // Every stored tensor must be one this engine reads: a silently ignored one (a reduced-vocabulary
  // d2t map, DFlash2's conv layers) would make the drafter compute something else.
  std::set<std::string> expected;
  std::set<std::string> copies = {"embed_tokens.weight", "lm_head.weight"};
  bool all_bf16 = true;
  HfDrafter out;
  out.drafter = DSparkDrafter::from_parameters(c, target, [&](const std::string& name, const std::vector<int64_t>& shape) {
    const std::string stored = deepspec_name(name);
    if (stored.empty()) fail("{}: no {} tensor for parameter {}", store.location(), hf_drafter_layout_name(layout), name);
    expected.insert(stored);
    if (!store.contains(stored)) fail("{}: missing tensor {}", store.location(), stored);
    all_bf16 = all_bf16 && store.get(stored).dtype == io::DType::BF16;
    return read_float_tensor(store, stored, shape);
  });
  for (const auto& [name, view] : store.tensors()) {
    if (expected.count(name) || name.ends_with("rotary_emb.inv_freq")) continue;
    if (copies.count(name)) {
      const ModelWeights& w = target.weights();
      check_copy(store, name, name == "lm_head.weight" && w.lm_head.defined() ? w.lm_head : w.embed);
      continue;
    }
    fail("{}: unexpected tensor {} (not part of a {} drafter this engine reads)", view.file, name,
         hf_drafter_layout_name(layout));
  }
  out.dtype = all_bf16 ? c10::kBFloat16 : c10::kFloat;
  return out;
}

std::unique_ptr<DSparkDrafter> load_drafter_dir(const std::string& dir, Transformer& target) {
  if (auto layout = detect_hf_drafter(dir)) return read_hf_drafter(dir, *layout, target).drafter;
  return DSparkDrafter::load(dir, target);
}

void write_deepspec(const DSparkDrafter& drafter, Transformer& target, const std::string& target_dir,
                    const std::string& out_dir, c10::ScalarType dtype, size_t max_shard_bytes) {
  const DSparkConfig& c = drafter.config();
  const ModelConfig& tc = target.config();
  if (c.draft_vocab_size > 0)
    fail("the drafter has a reduced draft vocabulary ({} of {} tokens) and DeepSpec's layout has no d2t map; "
         "train it without --draft-vocab to export it", c.draft_vocab_size, drafter.target().vocab_size);
  if (!c.target_width || c.mask_token_id < 0 || !c.sample_from_anchor || c.context != ContextMode::Layers)
    fail("the drafter does not use DeepSpec's layout (it needs the target's width, a mask token, anchor-first "
         "blocks and a 'layers' context; train it with --layout deepspec)");
  if (!(drafter.target() == TargetIdentity::of(target))) fail("the drafter was made for another target than '{}'", target_dir);
  const std::string target_config_path = (fs::path(target_dir) / "config.json").string();
  json config = json::parse(io::read_text_file(target_config_path), nullptr, false);
  if (config.is_discarded() || !config.is_object()) fail("{}: not valid JSON", target_config_path);
  // DeepSpec's build_draft_config: a copy of the target's config with the drafter's keys set.
  config["architectures"] = {kDeepSpecArch};
  config["num_target_layers"] = tc.num_layers;
  config["num_hidden_layers"] = c.num_layers;
  config["hidden_size"] = c.width;
  config["num_attention_heads"] = c.num_heads;
  config["num_key_value_heads"] = c.kv_heads();
  config["head_dim"] = c.head_dim;
  config["intermediate_size"] = c.ffn_size;
  config["hidden_act"] = "silu";
  config["attention_bias"] = false;
  config["rms_norm_eps"] = c.rms_norm_eps;
  config.erase("rope_scaling");
  if (config.contains("rope_parameters")) config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
  else config["rope_theta"] = c.rope_theta;
  config["use_sliding_window"] = false;
  config["block_size"] = c.block_size;
  config["mask_token_id"] = c.mask_token_id;
  config["target_layer_ids"] = c.target_layers;
  config["num_anchors"] = kDeepSpecAnchors;
  config["tie_word_embeddings"] = false;
  config["layer_types"] = std::vector<std::string>(size_t(c.num_layers), "full_attention");
  config["enable_confidence_head"] = c.confidence;
  if (c.confidence) config["confidence_head_with_markov"] = c.confidence_reads_markov();
  else config.erase("confidence_head_with_markov");
  config["markov_rank"] = c.markov == MarkovKind::None ? 0 : c.markov_rank;
  if (c.markov != MarkovKind::None) config["markov_head_type"] = markov_kind_name(c.markov);
  else config.erase("markov_head_type");
  const char* dtype_name = dtype == c10::kBFloat16 ? "bfloat16" : "float32";
  if (config.contains("torch_dtype")) config["torch_dtype"] = dtype_name;
  if (config.contains("dtype")) config["dtype"] = dtype_name;

  std::vector<at::Tensor> keep;
  std::vector<io::TensorToWrite> tensors;
  auto add = [&](const std::string& name, const at::Tensor& value) {
    at::Tensor t = value.detach().to(torch::kCPU).to(dtype).contiguous();
    keep.push_back(t);
    tensors.push_back({name, dtype == c10::kBFloat16 ? io::DType::BF16 : io::DType::F32, t.sizes().vec(), t.data_ptr(),
                       size_t(t.nbytes())});
  };
  const ModelWeights& w = target.weights();
  add("embed_tokens.weight", w.embed);
  add("lm_head.weight", w.lm_head.defined() ? w.lm_head : w.embed);
  for (const auto& [name, value] : drafter.named_parameters()) {
    const std::string stored = deepspec_name(name);
    if (stored.empty()) fail("drafter parameter {} has no DeepSpec counterpart", name);
    add(stored, value);
  }
  fs::create_directories(out_dir);
  io::write_safetensors_dir(out_dir, tensors, {{"format", "pt"}}, max_shard_bytes);
  io::write_text_atomic((fs::path(out_dir) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace dspark
