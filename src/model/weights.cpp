#include "model/weights.h"

#include <torch/torch.h>
#include <fmt/ranges.h>  // fmt::join (fmt >= 11 keeps it there)

#include "io/safetensors.h"
#include "util/error.h"

namespace dspark {
namespace {

c10::ScalarType to_scalar(io::DType dtype, const std::string& where) {
  switch (dtype) {
    case io::DType::F32: return torch::kFloat32;
    case io::DType::BF16: return torch::kBFloat16;
    case io::DType::F16: return torch::kFloat16;
    default: fail("{}: unsupported dtype {} for a model weight", where, io::dtype_name(dtype));
  }
}

io::DType to_io(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return io::DType::F32;
    case torch::kBFloat16: return io::DType::BF16;
    case torch::kFloat16: return io::DType::F16;
    default: fail("cannot save tensors of dtype {}", c10::toString(dtype));
  }
}

// Wraps a mapped tensor without copying; the mapping stays alive as long as the tensor does.
at::Tensor view_tensor(const io::TensorView& view) {
  auto owner = view.owner;
  auto dtype = to_scalar(view.dtype, view.file + ": " + view.name);
  return torch::from_blob(const_cast<void*>(view.data), view.shape,
                          [owner](void*) mutable { owner.reset(); },
                          torch::TensorOptions().dtype(dtype));
}

struct Loader {
  const io::TensorStore& store;
  c10::ScalarType dtype;
  std::string prefix;  // "model." or "language_model.model." etc.

  at::Tensor get(const std::string& name, std::vector<int64_t> shape) const {
    const std::string full = name.rfind("lm_head", 0) == 0 ? lm_head_prefix() + name : prefix + name;
    if (!store.contains(full)) fail("missing tensor '{}' in {}", full, store.location());
    const io::TensorView& view = store.get(full);
    if (view.shape != shape)
      fail("tensor '{}' in {} has shape [{}], config wants [{}]", full, view.file,
           fmt::join(view.shape, ", "), fmt::join(shape, ", "));
    at::Tensor t = view_tensor(view);
    // Undefined = mixed: bf16 matrices stay bf16 (mapped, not copied), everything else float32.
    const c10::ScalarType want = dtype != c10::ScalarType::Undefined ? dtype
                                 : shape.size() == 2 && t.scalar_type() == torch::kBFloat16 ? torch::kBFloat16
                                                                                            : torch::kFloat32;
    if (t.scalar_type() != want) t = t.to(want);
    return t;
  }
  std::string lm_head_prefix() const {
    // "language_model.model." -> "language_model."; "model.language_model." (transformers >= 4.52's
    // *ForConditionalGeneration) -> "" (lm_head.weight at the top level).
    if (prefix == "model.language_model.") return "";
    const std::string tail = "model.";
    return prefix.size() >= tail.size() ? prefix.substr(0, prefix.size() - tail.size()) : "";
  }
};

// Every tensor of layer `l` that config `c` has, with its HF name (after "layers.{l}."), shape and
// whether it is a norm-like vector (identity-initialised: norms and Gemma4's layer scalar).
template <typename Fn>
void for_each_layer_tensor(LayerWeights& w, const ModelConfig& c, int64_t l, Fn&& fn) {
  const int64_t H = c.hidden_size, F = c.intermediate_at(l), D = c.head_dim_at(l);
  const int64_t qd = c.num_heads * D, kvd = c.kv_heads_at(l) * D;
  const bool own_kv = !c.kv_shared(l), own_v = own_kv && !c.values_from_keys(l);
  fn("input_layernorm.weight", w.input_norm, std::vector<int64_t>{H}, true);
  fn("self_attn.q_proj.weight", w.q_proj, std::vector<int64_t>{qd, H}, false);
  if (own_kv) fn("self_attn.k_proj.weight", w.k_proj, std::vector<int64_t>{kvd, H}, false);
  if (own_v) fn("self_attn.v_proj.weight", w.v_proj, std::vector<int64_t>{kvd, H}, false);
  if (c.qkv_bias) {
    fn("self_attn.q_proj.bias", w.q_bias, std::vector<int64_t>{qd}, false);
    if (own_kv) fn("self_attn.k_proj.bias", w.k_bias, std::vector<int64_t>{kvd}, false);
    if (own_v) fn("self_attn.v_proj.bias", w.v_bias, std::vector<int64_t>{kvd}, false);
  }
  if (c.qk_norm) {
    fn("self_attn.q_norm.weight", w.q_norm, std::vector<int64_t>{D}, true);
    if (own_kv) fn("self_attn.k_norm.weight", w.k_norm, std::vector<int64_t>{D}, true);
  }
  fn("self_attn.o_proj.weight", w.o_proj, std::vector<int64_t>{H, qd}, false);
  if (c.o_bias) fn("self_attn.o_proj.bias", w.o_bias, std::vector<int64_t>{H}, false);
  fn("post_attention_layernorm.weight", w.post_attn_norm, std::vector<int64_t>{H}, true);
  if (c.sandwich_norm) {
    fn("pre_feedforward_layernorm.weight", w.pre_ffn_norm, std::vector<int64_t>{H}, true);
    fn("post_feedforward_layernorm.weight", w.post_ffn_norm, std::vector<int64_t>{H}, true);
  }
  fn("mlp.gate_proj.weight", w.gate_proj, std::vector<int64_t>{F, H}, false);
  fn("mlp.up_proj.weight", w.up_proj, std::vector<int64_t>{F, H}, false);
  fn("mlp.down_proj.weight", w.down_proj, std::vector<int64_t>{H, F}, false);
  if (c.per_layer_size > 0) {
    const int64_t P = c.per_layer_size;
    fn("per_layer_input_gate.weight", w.per_layer_gate, std::vector<int64_t>{P, H}, false);
    fn("per_layer_projection.weight", w.per_layer_proj, std::vector<int64_t>{H, P}, false);
    fn("post_per_layer_input_norm.weight", w.post_per_layer_norm, std::vector<int64_t>{H}, true);
  }
  if (c.layer_scalar) fn("layer_scalar", w.layer_scalar, std::vector<int64_t>{1}, true);
}

// The model-level Gemma4 per-layer-embedding tensors (after the "model." prefix).
template <typename Fn>
void for_each_per_layer_embedding_tensor(ModelWeights& w, const ModelConfig& c, Fn&& fn) {
  if (c.per_layer_size <= 0) return;
  const int64_t LP = c.num_layers * c.per_layer_size;
  fn("embed_tokens_per_layer.weight", w.embed_per_layer, std::vector<int64_t>{c.per_layer_vocab, LP}, false);
  fn("per_layer_model_projection.weight", w.per_layer_model_proj, std::vector<int64_t>{LP, c.hidden_size}, false);
  fn("per_layer_projection_norm.weight", w.per_layer_proj_norm, std::vector<int64_t>{c.per_layer_size}, true);
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor*>> ModelWeights::named() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  out.emplace_back("model.embed_tokens.weight", &embed);
  // Names only: a config with every optional tensor, of which the defined ones are listed.
  ModelConfig every;
  every.qkv_bias = every.o_bias = every.qk_norm = every.sandwich_norm = every.layer_scalar = true;
  every.per_layer_size = 1;
  every.num_layers = int64_t(layers.size());
  auto add = [&](std::string name, at::Tensor& t) {
    if (t.defined()) out.emplace_back(std::move(name), &t);
  };
  for (size_t i = 0; i < layers.size(); ++i)
    for_each_layer_tensor(layers[i], every, int64_t(i), [&](const char* name, at::Tensor& t, auto, bool) {
      add(fmt::format("model.layers.{}.{}", i, name), t);
    });
  for_each_per_layer_embedding_tensor(*this, every, [&](const char* name, at::Tensor& t, auto, bool) {
    add(fmt::format("model.{}", name), t);
  });
  out.emplace_back("model.norm.weight", &final_norm);
  if (!lm_head.is_same(embed)) out.emplace_back("lm_head.weight", &lm_head);
  return out;
}

ModelWeights load_weights(const ModelConfig& c, const std::string& dir, c10::ScalarType dtype) {
  io::TensorStore store = io::TensorStore::open(dir);
  Loader loader{store, dtype, "model."};
  for (const char* prefix : {"model.", "language_model.model.", "model.language_model."}) {
    if (store.contains(std::string(prefix) + "embed_tokens.weight")) {
      loader.prefix = prefix;
      break;
    }
  }
  ModelWeights w;
  const int64_t H = c.hidden_size;
  w.embed = loader.get("embed_tokens.weight", {c.vocab_size, H});
  w.layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    for_each_layer_tensor(w.layers[i], c, i, [&](const char* name, at::Tensor& t,
                                                 std::vector<int64_t> shape, bool) {
      t = loader.get(fmt::format("layers.{}.{}", i, name), shape);
    });
  }
  for_each_per_layer_embedding_tensor(w, c, [&](const char* name, at::Tensor& t, std::vector<int64_t> shape, bool) {
    t = loader.get(name, shape);
  });
  w.final_norm = loader.get("norm.weight", {H});
  const bool has_head = store.contains(loader.lm_head_prefix() + "lm_head.weight");
  w.lm_head = (c.tie_word_embeddings || !has_head) ? w.embed : loader.get("lm_head.weight", {c.vocab_size, H});
  if (!c.tie_word_embeddings && !has_head)
    fail("missing tensor 'lm_head.weight' in {} (config has tie_word_embeddings = false)", dir);
  return w;
}

ModelWeights random_weights(const ModelConfig& c, c10::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const double std_dev = c.initializer_range;
  auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  // Gemma's norms scale by (1 + w), so identity is w = 0; the others scale by w, identity is 1.
  auto norm = [&](int64_t n) {
    return (c.gemma_norm ? torch::zeros({n}, opts) : torch::ones({n}, opts)).to(dtype);
  };
  auto dense = [&](std::vector<int64_t> shape) {
    return (torch::randn(shape, opts) * std_dev).to(dtype);
  };
  ModelWeights w;
  w.embed = dense({c.vocab_size, c.hidden_size});
  w.layers.resize(c.num_layers);
  auto init = [&](const char*, at::Tensor& t, std::vector<int64_t> shape, bool is_norm) {
    if (is_norm) t = norm(shape[0]);
    else if (shape.size() == 1) t = torch::zeros(shape, opts).to(dtype);  // biases
    else t = dense(shape);
  };
  for (int64_t i = 0; i < c.num_layers; ++i) for_each_layer_tensor(w.layers[size_t(i)], c, i, init);
  for_each_per_layer_embedding_tensor(w, c, init);
  w.final_norm = norm(c.hidden_size);
  w.lm_head = c.tie_word_embeddings ? w.embed : dense({c.vocab_size, c.hidden_size});
  return w;
}

void save_weights(ModelWeights& weights, const std::string& dir, c10::ScalarType dtype,
                  size_t max_shard_bytes) {
  std::vector<at::Tensor> keep;  // converted tensors must outlive the write
  std::vector<io::TensorToWrite> out;
  for (auto& [name, tensor] : weights.named()) {
    if (!tensor->defined()) continue;
    at::Tensor t = tensor->detach().to(torch::kCPU).to(dtype).contiguous();
    keep.push_back(t);
    out.push_back({name, to_io(dtype), t.sizes().vec(), t.data_ptr(), size_t(t.nbytes())});
  }
  io::write_safetensors_dir(dir, out, {{"format", "pt"}}, max_shard_bytes);
}

c10::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32" || name == "f32" || name == "fp32") return torch::kFloat32;
  if (name == "bfloat16" || name == "bf16") return torch::kBFloat16;
  if (name == "float16" || name == "f16" || name == "fp16") return torch::kFloat16;
  fail("unknown dtype '{}' (want f32, bf16 or f16)", name);
}

std::string dtype_to_hf(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return "float32";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat16: return "float16";
    default: return c10::toString(dtype);
  }
}

}  // namespace dspark
