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
  if (type != "none" && type != "linear" && type != "llama3")
    fail("{}: unsupported rope_scaling type '{}' (supported: linear, llama3)", source, type);
  scaling.type = type;
  scaling.factor = value_or<double>(rs, "factor", 1.0);
  scaling.low_freq_factor = value_or<double>(rs, "low_freq_factor", 1.0);
  scaling.high_freq_factor = value_or<double>(rs, "high_freq_factor", 4.0);
  scaling.original_max_position_embeddings = value_or<int64_t>(rs, "original_max_position_embeddings", 8192);
  return scaling;
}

}  // namespace

const char* architecture_name(Architecture arch) {
  switch (arch) {
    case Architecture::Qwen3: return "Qwen3ForCausalLM";
    case Architecture::Qwen2: return "Qwen2ForCausalLM";
    case Architecture::Llama: return "LlamaForCausalLM";
    case Architecture::Gemma2: return "Gemma2ForCausalLM";
    case Architecture::Gemma3: return "Gemma3ForCausalLM";
  }
  return "?";
}

int64_t ModelConfig::parameter_count() const {
  const int64_t H = hidden_size;
  int64_t per_layer = H * q_dim() + 2 * H * kv_dim() + q_dim() * H  // q, k, v, o
                      + 3 * H * intermediate_size                   // gate, up, down
                      + 2 * H;                                      // input + post-attn norms
  if (qkv_bias) per_layer += q_dim() + 2 * kv_dim();
  if (o_bias) per_layer += H;
  if (qk_norm) per_layer += 2 * head_dim;
  if (sandwich_norm) per_layer += 2 * H;
  int64_t total = num_layers * per_layer + vocab_size * H + H;
  if (!tie_word_embeddings) total += vocab_size * H;
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
  else
    fail("{}: unsupported architecture '{}' (supported: Qwen3ForCausalLM, Qwen2ForCausalLM, "
         "LlamaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM)",
         source, arch_name.empty() ? model_type : arch_name);
  c.architecture_name = architecture_name(c.arch);
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
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null()
                   ? require_int(j, "head_dim", source)
                   : c.hidden_size / c.num_heads;
  c.max_position_embeddings = value_or<int64_t>(j, "max_position_embeddings", 4096);
  c.rms_norm_eps = value_or<double>(j, "rms_norm_eps", 1e-6);
  c.initializer_range = value_or<double>(j, "initializer_range", 0.02);
  c.rope_theta = value_or<double>(j, "rope_theta", 10000.0);
  c.rope_local_theta = value_or<double>(j, "rope_local_base_freq", c.rope_theta);
  c.tie_word_embeddings = value_or<bool>(j, "tie_word_embeddings", gemma);

  if (j.contains("rope_scaling") && j["rope_scaling"].is_object())
    c.rope_scaling = parse_rope_scaling(j["rope_scaling"], source);
  // transformers >= 5 writes rope_theta and the scaling keys together as rope_parameters instead:
  // one dict, or (Gemma3) one per layer type. Reading only the old keys would silently fall back
  // to theta 10000 and no scaling.
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    const bool per_layer_type = rp.contains("full_attention") || rp.contains("sliding_attention");
    const json global = per_layer_type ? rp.value("full_attention", json::object()) : rp;
    c.rope_theta = value_or<double>(global, "rope_theta", c.rope_theta);
    c.rope_scaling = parse_rope_scaling(global, source);
    c.rope_local_theta = c.rope_theta;
    if (per_layer_type && rp.contains("sliding_attention") && rp["sliding_attention"].is_object()) {
      const json& local = rp["sliding_attention"];
      c.rope_local_theta = value_or<double>(local, "rope_theta", c.rope_theta);
      if (parse_rope_scaling(local, source).type != "none")
        fail("{}: RoPE scaling on sliding-window layers is not supported", source);
    }
  }

  // attention_bias biases q, k, v and o (HF's Llama, Qwen3, Gemma); Qwen2 always biases q, k, v
  // and never o.
  c.qkv_bias = c.arch == Architecture::Qwen2 || value_or<bool>(j, "attention_bias", false);
  c.o_bias = c.arch != Architecture::Qwen2 && value_or<bool>(j, "attention_bias", false);
  if (value_or<bool>(j, "mlp_bias", false)) fail("{}: mlp_bias = true is not supported", source);
  c.qk_norm = c.arch == Architecture::Qwen3 || c.arch == Architecture::Gemma3;
  c.gemma_norm = gemma;
  c.scale_embeddings = gemma;
  c.sandwich_norm = gemma;
  std::string act = value_or<std::string>(j, "hidden_activation",
                                          value_or<std::string>(j, "hidden_act", "silu"));
  if (act == "silu" || act == "swish") c.activation = Activation::SiLU;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu") c.activation = Activation::GeluTanh;
  else fail("{}: unsupported activation '{}'", source, act);

  const double query_scalar =
      gemma ? value_or<double>(j, "query_pre_attn_scalar", double(c.head_dim)) : double(c.head_dim);
  c.attn_scale = 1.0 / std::sqrt(query_scalar);
  if (gemma) {
    c.attn_softcap = optional_double(j, "attn_logit_softcapping");
    c.final_softcap = optional_double(j, "final_logit_softcapping");
  }

  // Which layers attend through a sliding window.
  c.layer_is_sliding.assign(c.num_layers, false);
  const int64_t window = value_or<int64_t>(j, "sliding_window", 0);
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const auto types = j["layer_types"].get<std::vector<std::string>>();
    if ((int64_t)types.size() != c.num_layers)
      fail("{}: layer_types has {} entries, want num_hidden_layers = {}", source, types.size(),
           c.num_layers);
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_is_sliding[i] = types[i] == "sliding_attention";
  } else if (c.arch == Architecture::Gemma2) {
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_is_sliding[i] = i % 2 == 0;
  } else if (c.arch == Architecture::Gemma3) {
    const int64_t pattern = value_or<int64_t>(j, "sliding_window_pattern", 6);
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_is_sliding[i] = (i + 1) % pattern != 0;
  } else if (value_or<bool>(j, "use_sliding_window", false) && window > 0) {
    const int64_t first = value_or<int64_t>(j, "max_window_layers", 0);
    for (int64_t i = first; i < c.num_layers; ++i) c.layer_is_sliding[i] = true;
  }
  bool any_sliding = false;
  for (bool s : c.layer_is_sliding) any_sliding |= s;
  if (any_sliding) {
    if (window <= 0) fail("{}: sliding-window layers need a positive 'sliding_window'", source);
    c.sliding_window = window;
  }

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
