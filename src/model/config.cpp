#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "util/error.h"

namespace dspark {
namespace {

using json = nlohmann::json;

int64_t require_int(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    fail("{}: missing or invalid '{}' (want a positive integer)", source, key);
  return j[key].get<int64_t>();
}

template <typename T>
T value_or(const json& j, const char* key, T fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  return j[key].get<T>();
}

std::optional<double> optional_double(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<double>();
}

std::vector<int64_t> int_or_list(const json& j) {
  if (j.is_null()) return {};
  if (j.is_number_integer()) return {j.get<int64_t>()};
  if (j.is_array()) return j.get<std::vector<int64_t>>();
  return {};
}

// rope_scaling (transformers < 5) or one entry of rope_parameters (transformers >= 5): the same
// keys, with "rope_type" or the older "type".
RopeScaling parse_rope_scaling(const json& rs, const std::string& source) {
  RopeScaling scaling;
  std::string type = rs.contains("rope_type") ? rs["rope_type"].get<std::string>()
                                              : value_or<std::string>(rs, "type", "none");
  if (type == "default") type = "none";
  if (type != "none" && type != "linear" && type != "llama3" && type != "proportional")
    fail("{}: unsupported rope_scaling type '{}' (supported: linear, llama3, proportional)", source, type);
  scaling.type = type;
  scaling.factor = value_or<double>(rs, "factor", 1.0);
  if (type == "proportional") {
    scaling.partial_rotary_factor = value_or<double>(rs, "partial_rotary_factor", 1.0);
    if (!(scaling.partial_rotary_factor > 0.0 && scaling.partial_rotary_factor <= 1.0))
      fail("{}: partial_rotary_factor {} is outside (0, 1]", source, scaling.partial_rotary_factor);
  }
  scaling.low_freq_factor = value_or<double>(rs, "low_freq_factor", 1.0);
  scaling.high_freq_factor = value_or<double>(rs, "high_freq_factor", 4.0);
  scaling.original_max_position_embeddings = value_or<int64_t>(rs, "original_max_position_embeddings", 8192);
  return scaling;
}

// Gemma4's text decoder beyond the Gemma3 shape, as transformers' Gemma4TextConfig and
// modeling_gemma4.py define it: per-layer head geometry, KV sharing, k = v, per-layer embeddings.
void parse_gemma4(const json& j, const std::string& source, ModelConfig& c) {
  if (value_or<bool>(j, "enable_moe_block", false))
    fail("{}: Gemma-4 mixture-of-experts layers (enable_moe_block = true) are not supported", source);
  const std::string bidirectional = value_or<std::string>(j, "use_bidirectional_attention", "");
  if (bidirectional == "all")
    fail("{}: use_bidirectional_attention = \"all\" (non-causal text attention) is not supported", source);
  if (!bidirectional.empty() && bidirectional != "vision")
    fail("{}: unknown use_bidirectional_attention '{}'", source, bidirectional);
  const int64_t L = c.num_layers;
  c.v_norm = true;
  c.k_eq_v = value_or<bool>(j, "attention_k_eq_v", false);
  c.layer_scalar = true;
  c.per_layer_size = value_or<int64_t>(j, "hidden_size_per_layer_input", 256);
  c.per_layer_vocab = value_or<int64_t>(j, "vocab_size_per_layer_input", 262144);
  if (c.per_layer_size < 0) fail("{}: hidden_size_per_layer_input must not be negative", source);
  if (c.per_layer_size > 0 && c.per_layer_vocab < c.vocab_size)
    fail("{}: vocab_size_per_layer_input ({}) is smaller than vocab_size ({}): token ids would index past the "
         "per-layer embeddings", source, c.per_layer_vocab, c.vocab_size);

  // Full-attention layers: head_dim = global_head_dim and, with attention_k_eq_v, num_key_value_heads =
  // num_global_key_value_heads. transformers >= 5.25 writes the result as per_layer_config (layer index ->
  // overrides); released checkpoints carry the two keys.
  c.layer_head_dim.assign(size_t(L), c.head_dim);
  c.layer_kv_heads.assign(size_t(L), c.num_kv_heads);
  c.layer_intermediate.assign(size_t(L), c.intermediate_size);
  auto positive = [&](const json& v, const std::string& what) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) fail("{}: invalid '{}' (want a positive integer)", source, what);
    return v.get<int64_t>();
  };
  if (j.contains("per_layer_config") && j["per_layer_config"].is_object()) {
    for (const auto& [key, overrides] : j["per_layer_config"].items()) {
      int64_t layer = -1;
      try {
        size_t used = 0;
        layer = std::stoll(key, &used);
        if (used != key.size()) layer = -1;
      } catch (const std::exception&) {
      }
      if (layer < 0 || layer >= L) fail("{}: per_layer_config key '{}' is not a layer index in [0, {})", source, key, L);
      if (!overrides.is_object()) fail("{}: per_layer_config['{}'] must be an object", source, key);
      for (const auto& [name, value] : overrides.items()) {
        const std::string where = "per_layer_config['" + key + "']." + name;
        if (name == "head_dim") c.layer_head_dim[size_t(layer)] = positive(value, where);
        else if (name == "num_key_value_heads") c.layer_kv_heads[size_t(layer)] = positive(value, where);
        else fail("{}: per-layer override '{}' is not supported (supported: head_dim, num_key_value_heads)",
                  source, where);
      }
    }
  } else {
    const int64_t global_head_dim = j.contains("global_head_dim") && !j["global_head_dim"].is_null()
                                        ? positive(j["global_head_dim"], "global_head_dim") : 512;
    std::optional<int64_t> global_kv;
    if (c.k_eq_v && j.contains("num_global_key_value_heads") && !j["num_global_key_value_heads"].is_null())
      global_kv = positive(j["num_global_key_value_heads"], "num_global_key_value_heads");
    for (int64_t l = 0; l < L; ++l)
      if (!c.layer_is_sliding[size_t(l)]) {
        c.layer_head_dim[size_t(l)] = global_head_dim;
        if (global_kv) c.layer_kv_heads[size_t(l)] = *global_kv;
      }
  }
  for (int64_t l = 0; l < L; ++l) {
    if (c.layer_head_dim[size_t(l)] % 2 != 0) fail("{}: layer {} has an odd head_dim {}", source, l, c.layer_head_dim[size_t(l)]);
    if (c.num_heads % c.layer_kv_heads[size_t(l)] != 0)
      fail("{}: layer {}: num_attention_heads ({}) is not a multiple of its num_key_value_heads ({})", source, l,
           c.num_heads, c.layer_kv_heads[size_t(l)]);
    // One RoPE table per attention kind, as transformers builds it.
    const int64_t first = [&] {
      for (int64_t m = 0; m < L; ++m) if (c.layer_is_sliding[size_t(m)] == c.layer_is_sliding[size_t(l)]) return m;
      return l;
    }();
    if (c.layer_head_dim[size_t(l)] != c.layer_head_dim[size_t(first)] ||
        c.layer_kv_heads[size_t(l)] != c.layer_kv_heads[size_t(first)])
      fail("{}: layers {} and {} are both {} attention but differ in head_dim or num_key_value_heads, which is not "
           "supported", source, first, l, c.layer_is_sliding[size_t(l)] ? "sliding" : "full");
  }

  // KV sharing (Gemma4TextConfig.kv_sharing_modes): the last num_kv_shared_layers layers compute no keys
  // or values and attend to those of the last earlier layer of the same attention kind.
  const int64_t shared = value_or<int64_t>(j, "num_kv_shared_layers", 0);
  if (shared < 0 || shared >= L)
    fail("{}: num_kv_shared_layers = {} must be in [0, num_hidden_layers = {}) (some layer must compute keys and "
         "values)", source, shared, L);
  c.layer_kv_source.resize(size_t(L));
  const int64_t first_shared = L - shared;
  for (int64_t l = 0; l < L; ++l) {
    c.layer_kv_source[size_t(l)] = l;
    if (l < first_shared) continue;
    int64_t source_layer = -1;
    for (int64_t m = first_shared - 1; m >= 0 && source_layer < 0; --m)
      if (c.layer_is_sliding[size_t(m)] == c.layer_is_sliding[size_t(l)]) source_layer = m;
    if (source_layer < 0)
      fail("{}: KV-shared layer {} is {} attention but no earlier unshared layer of that kind computes keys and "
           "values", source, l, c.layer_is_sliding[size_t(l)] ? "sliding" : "full");
    c.layer_kv_source[size_t(l)] = source_layer;
    if (value_or<bool>(j, "use_double_wide_mlp", false)) c.layer_intermediate[size_t(l)] *= 2;
  }
}

}  // namespace

const char* architecture_name(Architecture arch) {
  switch (arch) {
    case Architecture::Qwen3: return "Qwen3ForCausalLM";
    case Architecture::Qwen2: return "Qwen2ForCausalLM";
    case Architecture::Llama: return "LlamaForCausalLM";
    case Architecture::Gemma2: return "Gemma2ForCausalLM";
    case Architecture::Gemma3: return "Gemma3ForCausalLM";
    case Architecture::Gemma4: return "Gemma4ForCausalLM";
  }
  return "?";
}

int64_t ModelConfig::head_dim_of_kind(bool sliding) const {
  for (int64_t l = 0; l < num_layers; ++l)
    if (layer_is_sliding[size_t(l)] == sliding) return head_dim_at(l);
  return head_dim;
}

int64_t ModelConfig::parameter_count() const {
  const int64_t H = hidden_size;
  int64_t total = vocab_size * H + H;  // embeddings, final norm
  if (!tie_word_embeddings) total += vocab_size * H;
  if (per_layer_size > 0)  // PLE table, its projection and norm
    total += per_layer_vocab * num_layers * per_layer_size + num_layers * per_layer_size * H + per_layer_size;
  for (int64_t l = 0; l < num_layers; ++l) {
    const int64_t D = head_dim_at(l), qd = num_heads * D, kvd = kv_heads_at(l) * D, F = intermediate_at(l);
    const bool own_kv = !kv_shared(l), own_v = own_kv && !values_from_keys(l);
    int64_t n = H * qd + qd * H + 3 * H * F + 2 * H;  // q, o, gate/up/down, input + post-attn norms
    if (own_kv) n += H * kvd;
    if (own_v) n += H * kvd;
    if (qkv_bias) n += qd + (own_kv ? kvd : 0) + (own_v ? kvd : 0);
    if (o_bias) n += H;
    if (qk_norm) n += D + (own_kv ? D : 0);
    if (sandwich_norm) n += 2 * H;
    if (per_layer_size > 0) n += 2 * H * per_layer_size + H;
    if (layer_scalar) n += 1;
    total += n;
  }
  return total;
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON ({})", source, e.what());
  }
  if (!j.is_object()) fail("{}: config must be a JSON object", source);
  // Multimodal Gemma3 checkpoints nest the language model config.
  if (j.contains("text_config") && j["text_config"].is_object()) {
    json text = j["text_config"];
    for (auto& [k, v] : j.items())
      if (!text.contains(k) && k != "text_config") text[k] = v;
    j = text;
  }

  ModelConfig c;
  std::string arch_name;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty())
    arch_name = j["architectures"][0].get<std::string>();
  const std::string model_type = value_or<std::string>(j, "model_type", "");
  if (arch_name == "Qwen3ForCausalLM" || (arch_name.empty() && model_type == "qwen3"))
    c.arch = Architecture::Qwen3;
  else if (arch_name == "Qwen2ForCausalLM" || (arch_name.empty() && model_type == "qwen2"))
    c.arch = Architecture::Qwen2;
  else if (arch_name == "LlamaForCausalLM" || (arch_name.empty() && model_type == "llama"))
    c.arch = Architecture::Llama;
  else if (arch_name == "Gemma2ForCausalLM" || (arch_name.empty() && model_type == "gemma2"))
    c.arch = Architecture::Gemma2;
  else if (arch_name == "Gemma3ForCausalLM" || arch_name == "Gemma3ForConditionalGeneration" ||
           (arch_name.empty() && (model_type == "gemma3_text" || model_type == "gemma3")))
    c.arch = Architecture::Gemma3;
  else if (arch_name == "Gemma4ForCausalLM" || arch_name == "Gemma4ForConditionalGeneration" ||
           (arch_name.empty() && (model_type == "gemma4_text" || model_type == "gemma4")))
    c.arch = Architecture::Gemma4;
  else
    fail("{}: unsupported architecture '{}' (supported: Qwen3ForCausalLM, Qwen2ForCausalLM, "
         "LlamaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma4ForCausalLM, "
         "Gemma4ForConditionalGeneration)",
         source, arch_name.empty() ? model_type : arch_name);
  c.architecture_name = architecture_name(c.arch);
  const bool gemma4 = c.arch == Architecture::Gemma4;
  const bool gemma = c.arch == Architecture::Gemma2 || c.arch == Architecture::Gemma3;

  c.vocab_size = require_int(j, "vocab_size", source);
  c.hidden_size = require_int(j, "hidden_size", source);
  c.intermediate_size = require_int(j, "intermediate_size", source);
  c.num_layers = require_int(j, "num_hidden_layers", source);
  c.num_heads = require_int(j, "num_attention_heads", source);
  c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                       ? require_int(j, "num_key_value_heads", source)
                       : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0)
    fail("{}: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})", source,
         c.num_heads, c.num_kv_heads);
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? require_int(j, "head_dim", source)
               : gemma4                                             ? 256  // Gemma4TextConfig's default
                                                                    : c.hidden_size / c.num_heads;
  c.max_position_embeddings = value_or<int64_t>(j, "max_position_embeddings", 4096);
  c.rms_norm_eps = value_or<double>(j, "rms_norm_eps", 1e-6);
  c.initializer_range = value_or<double>(j, "initializer_range", 0.02);
  c.rope_theta = value_or<double>(j, "rope_theta", 10000.0);
  c.rope_local_theta = value_or<double>(j, "rope_local_base_freq", c.rope_theta);
  c.tie_word_embeddings = value_or<bool>(j, "tie_word_embeddings", gemma || gemma4);

  if (j.contains("rope_scaling") && j["rope_scaling"].is_object())
    c.rope_scaling = parse_rope_scaling(j["rope_scaling"], source);
  // Gemma3's sliding layers have their own unscaled RoPE; the others share one RoPE, scaling included.
  if (c.arch != Architecture::Gemma3) c.rope_local_scaling = c.rope_scaling;
  // transformers >= 5 writes rope_theta and the scaling keys together as rope_parameters instead:
  // one dict, or (Gemma3) one per layer type. Reading only the old keys would silently fall back
  // to theta 10000 and no scaling.
  json rope_parameters = j.contains("rope_parameters") ? j["rope_parameters"] : json();
  if (gemma4 && !rope_parameters.is_object())  // Gemma4TextConfig's defaults
    rope_parameters = json::parse(R"({"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}})");
  if (rope_parameters.is_object()) {
    const json& rp = rope_parameters;
    const bool per_layer_type = rp.contains("full_attention") || rp.contains("sliding_attention");
    const json global = per_layer_type ? rp.value("full_attention", json::object()) : rp;
    c.rope_theta = value_or<double>(global, "rope_theta", c.rope_theta);
    c.rope_scaling = parse_rope_scaling(global, source);
    c.rope_local_theta = c.rope_theta;
    c.rope_local_scaling = per_layer_type ? RopeScaling{} : c.rope_scaling;
    if (per_layer_type && rp.contains("sliding_attention") && rp["sliding_attention"].is_object()) {
      const json& local = rp["sliding_attention"];
      c.rope_local_theta = value_or<double>(local, "rope_theta", c.rope_theta);
      c.rope_local_scaling = parse_rope_scaling(local, source);
    }
  }

  // attention_bias biases q, k, v and o (HF's Llama, Qwen3, Gemma); Qwen2 always biases q, k, v
  // and never o.
  c.qkv_bias = c.arch == Architecture::Qwen2 || value_or<bool>(j, "attention_bias", false);
  c.o_bias = c.arch != Architecture::Qwen2 && value_or<bool>(j, "attention_bias", false);
  if (value_or<bool>(j, "mlp_bias", false)) fail("{}: mlp_bias = true is not supported", source);
  c.qk_norm = c.arch == Architecture::Qwen3 || c.arch == Architecture::Gemma3 || gemma4;
  c.gemma_norm = gemma;
  c.norm_scale_f32 = gemma4;
  c.scale_embeddings = gemma || gemma4;
  c.sandwich_norm = gemma || gemma4;
  std::string act = value_or<std::string>(j, "hidden_activation",
                                          value_or<std::string>(j, "hidden_act", "silu"));
  if (act == "silu" || act == "swish") c.activation = Activation::SiLU;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu") c.activation = Activation::GeluTanh;
  else fail("{}: unsupported activation '{}'", source, act);

  const double query_scalar =
      gemma ? value_or<double>(j, "query_pre_attn_scalar", double(c.head_dim)) : double(c.head_dim);
  c.attn_scale = gemma4 ? 1.0 : 1.0 / std::sqrt(query_scalar);  // Gemma4: q_norm only, scaling 1
  if (gemma) c.attn_softcap = optional_double(j, "attn_logit_softcapping");
  if (gemma || gemma4) c.final_softcap = optional_double(j, "final_logit_softcapping");

  // Which layers attend through a sliding window.
  c.layer_is_sliding.assign(c.num_layers, false);
  const int64_t window = value_or<int64_t>(j, "sliding_window", gemma4 ? 512 : 0);
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const auto types = j["layer_types"].get<std::vector<std::string>>();
    if ((int64_t)types.size() != c.num_layers)
      fail("{}: layer_types has {} entries, want num_hidden_layers = {}", source, types.size(),
           c.num_layers);
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_is_sliding[i] = types[i] == "sliding_attention";
  } else if (c.arch == Architecture::Gemma2) {
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_is_sliding[i] = i % 2 == 0;
  } else if (c.arch == Architecture::Gemma3 || gemma4) {
    const int64_t pattern = value_or<int64_t>(j, "sliding_window_pattern", 6);
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_is_sliding[i] = (i + 1) % pattern != 0;
  } else if (value_or<bool>(j, "use_sliding_window", false) && window > 0) {
    const int64_t first = value_or<int64_t>(j, "max_window_layers", 0);
    for (int64_t i = first; i < c.num_layers; ++i) c.layer_is_sliding[i] = true;
  }
  // Gemma4TextConfig forces the last layer to full attention (with a warning); so does this.
  if (gemma4) c.layer_is_sliding.back() = false;
  bool any_sliding = false;
  for (bool s : c.layer_is_sliding) any_sliding |= s;
  if (any_sliding) {
    if (window <= 0) fail("{}: sliding-window layers need a positive 'sliding_window'", source);
    c.sliding_window = window;
  }

  if (gemma4) parse_gemma4(j, source, c);

  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer())
    c.bos_token_id = j["bos_token_id"].get<int64_t>();
  if (j.contains("eos_token_id")) c.eos_token_ids = int_or_list(j["eos_token_id"]);
  c.torch_dtype = value_or<std::string>(j, "torch_dtype", value_or<std::string>(j, "dtype", "float32"));
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  if (!fs::exists(file)) fail("no config.json in '{}'", path);
  ModelConfig c = parse_model_config(io::read_text_file(file), file);
  // generation_config.json may list more EOS ids (e.g. Gemma's <end_of_turn>).
  fs::path gen = fs::path(file).parent_path() / "generation_config.json";
  if (fs::exists(gen)) {
    try {
      auto g = nlohmann::json::parse(io::read_text_file(gen.string()));
      if (g.contains("eos_token_id"))
        for (int64_t id : int_or_list(g["eos_token_id"]))
          if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
            c.eos_token_ids.push_back(id);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: invalid JSON ({})", gen.string(), e.what());
    }
  }
  return c;
}

}  // namespace dspark
