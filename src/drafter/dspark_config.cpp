#include "drafter/dspark_config.h"

#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/transformer.h"
#include "util/error.h"

namespace dspark {
using json = nlohmann::json;

void DSparkConfig::validate() const {
  if (block_size < 1 || block_size > 64) fail("drafter block_size {} must be in 1..64", block_size);
  if (width < 1 || num_layers < 1 || num_heads < 1 || head_dim < 2 || head_dim % 2 || ffn_size < 1)
    fail("drafter sizes must be positive (head_dim even): width {}, layers {}, heads {}, head_dim {}, ffn {}", width,
         num_layers, num_heads, head_dim, ffn_size);
  if (markov != MarkovKind::None && markov_rank < 1) fail("markov_rank must be >= 1 with a Markov head");
  if (context == ContextMode::Layers && target_layers.empty()) fail("context mode 'layers' needs target_layers");
  if (num_kv_heads < 0 || num_heads % kv_heads() != 0)
    fail("drafter num_kv_heads {} must divide num_heads {}", num_kv_heads, num_heads);
  if (!sample_from_anchor && block_size < 2) fail("drafter block_size must be >= 2 when slots predict their own position");
  if (draft_vocab_size < 0) fail("drafter draft_vocab_size {} must be >= 0 (0: the target's vocabulary)", draft_vocab_size);
  if (mask_token_id < -1) fail("drafter mask_token_id {} must be >= 0 (or -1 for a learned mask)", mask_token_id);
}

void apply_deepspec_layout(DSparkConfig& o, const ModelConfig& tc, int64_t mask_token_id) {
  if (mask_token_id < 0 || mask_token_id >= tc.vocab_size)
    fail("the deepspec layout needs a mask token id in the target's vocabulary of {} (got {})", tc.vocab_size, mask_token_id);
  o.width = tc.hidden_size;
  o.target_width = true;
  o.num_heads = tc.num_heads;
  o.num_kv_heads = tc.num_kv_heads;
  o.head_dim = tc.head_dim;
  o.ffn_size = tc.intermediate_size;
  o.rope_theta = tc.rope_theta;
  o.rms_norm_eps = tc.rms_norm_eps;
  o.mask_token_id = mask_token_id;
  o.context = ContextMode::Layers;
  if (o.target_layers.empty()) o.target_layers = DSparkConfig::dflash_layers(tc.num_layers);
}

std::vector<int64_t> DSparkConfig::dflash_layers(int64_t target_layers, int64_t count) {
  const int64_t first = 1, last = std::max<int64_t>(1, target_layers - 3);
  const int64_t n = std::min(count, last - first + 1);
  std::vector<int64_t> layers;
  for (int64_t i = 0; i < n; ++i)
    layers.push_back(n == 1 ? first : first + int64_t(std::lround(double(i) * double(last - first) / double(n - 1))));
  if (target_layers <= 1) layers = {0};
  return layers;
}

TargetIdentity TargetIdentity::of(Transformer& target) {
  const ModelConfig& c = target.config();
  TargetIdentity id;
  id.architecture = c.architecture_name;
  id.vocab_size = c.vocab_size;
  id.hidden_size = c.hidden_size;
  id.num_layers = c.num_layers;
  // A sample of rows of the embedding and the head, rounded to bf16, so the fingerprint is the
  // same whatever dtype the target is loaded in.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const at::Tensor& w) {
    const int64_t stride = std::max<int64_t>(1, w.size(0) / 512);
    at::Tensor rows = w.detach().index({torch::indexing::Slice(0, torch::indexing::None, stride)})
                          .to(torch::kCPU).to(torch::kBFloat16).contiguous();
    const auto* p = reinterpret_cast<const uint8_t*>(rows.data_ptr());
    for (int64_t i = 0; i < rows.nbytes(); ++i) {
      h ^= p[i];
      h *= 1099511628211ull;
    }
  };
  mix(target.weights().embed);
  if (target.weights().lm_head.defined()) mix(target.weights().lm_head);
  id.fingerprint = fmt::format("{:016x}", h);
  return id;
}

const char* markov_kind_name(MarkovKind kind) {
  switch (kind) {
    case MarkovKind::None: return "none";
    case MarkovKind::Vanilla: return "vanilla";
    case MarkovKind::Gated: return "gated";
    case MarkovKind::Rnn: return "rnn";
  }
  return "?";
}

MarkovKind parse_markov_kind(const std::string& name) {
  if (name == "none") return MarkovKind::None;
  if (name == "vanilla") return MarkovKind::Vanilla;
  if (name == "gated") return MarkovKind::Gated;
  if (name == "rnn") return MarkovKind::Rnn;
  fail("unknown Markov head '{}' (want none, vanilla, gated or rnn)", name);
}

const char* context_mode_name(ContextMode mode) { return mode == ContextMode::Final ? "final" : "layers"; }

ContextMode parse_context_mode(const std::string& name) {
  if (name == "final") return ContextMode::Final;
  if (name == "layers") return ContextMode::Layers;
  fail("unknown context mode '{}' (want final or layers)", name);
}

json to_json(const DSparkConfig& c) {
  json j = {{"block_size", c.block_size}, {"width", c.width}, {"num_layers", c.num_layers},
            {"num_heads", c.num_heads}, {"head_dim", c.head_dim}, {"ffn_size", c.ffn_size},
            {"markov", markov_kind_name(c.markov)}, {"markov_rank", c.markov_rank},
            {"confidence", c.confidence}, {"context", context_mode_name(c.context)},
            {"target_layers", c.target_layers}, {"rope_theta", c.rope_theta},
            {"rms_norm_eps", c.rms_norm_eps}, {"init_std", c.init_std}};
  // The DeepSpec-layout options only when they differ from the defaults: a drafter's JSON, and
  // with it its fingerprint (which calibration files are checked against), stays what it was
  // before these options existed.
  const DSparkConfig d;
  if (c.kv_heads() != c.num_heads) j["num_kv_heads"] = c.kv_heads();
  if (c.target_width != d.target_width) j["target_width"] = c.target_width;
  if (c.mask_token_id != d.mask_token_id) j["mask_token_id"] = c.mask_token_id;
  if (c.confidence_with_markov != d.confidence_with_markov) j["confidence_with_markov"] = c.confidence_with_markov;
  if (c.sample_from_anchor != d.sample_from_anchor) j["sample_from_anchor"] = c.sample_from_anchor;
  if (c.draft_vocab_size > 0) j["draft_vocab_size"] = c.draft_vocab_size;  // likewise
  return j;
}

DSparkConfig dspark_config_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: drafter config must be a JSON object", source);
  DSparkConfig c;
  try {
    c.block_size = j.value("block_size", c.block_size);
    c.width = j.value("width", c.width);
    c.num_layers = j.value("num_layers", c.num_layers);
    c.num_heads = j.value("num_heads", c.num_heads);
    c.num_kv_heads = j.value("num_kv_heads", c.num_kv_heads);
    c.head_dim = j.value("head_dim", c.head_dim);
    c.ffn_size = j.value("ffn_size", c.ffn_size);
    c.markov = parse_markov_kind(j.value("markov", std::string(markov_kind_name(c.markov))));
    c.markov_rank = j.value("markov_rank", c.markov_rank);
    c.confidence = j.value("confidence", c.confidence);
    c.context = parse_context_mode(j.value("context", std::string(context_mode_name(c.context))));
    c.target_layers = j.value("target_layers", c.target_layers);
    c.target_width = j.value("target_width", c.target_width);
    c.mask_token_id = j.value("mask_token_id", c.mask_token_id);
    c.confidence_with_markov = j.value("confidence_with_markov", c.confidence_with_markov);
    c.sample_from_anchor = j.value("sample_from_anchor", c.sample_from_anchor);
    c.draft_vocab_size = j.value("draft_vocab_size", c.draft_vocab_size);
    c.rope_theta = j.value("rope_theta", c.rope_theta);
    c.rms_norm_eps = j.value("rms_norm_eps", c.rms_norm_eps);
    c.init_std = j.value("init_std", c.init_std);
  } catch (const json::exception& e) {
    fail("{}: bad drafter config: {}", source, e.what());
  }
  return c;
}

json to_json(const TargetIdentity& t) {
  return {{"architecture", t.architecture}, {"vocab_size", t.vocab_size}, {"hidden_size", t.hidden_size},
          {"num_layers", t.num_layers}, {"fingerprint", t.fingerprint}};
}

TargetIdentity target_identity_from_json(const json& j, const std::string& source) {
  TargetIdentity t;
  try {
    t.architecture = j.at("architecture").get<std::string>();
    t.vocab_size = j.at("vocab_size").get<int64_t>();
    t.hidden_size = j.at("hidden_size").get<int64_t>();
    t.num_layers = j.at("num_layers").get<int64_t>();
    t.fingerprint = j.at("fingerprint").get<std::string>();
  } catch (const json::exception& e) {
    fail("{}: bad target identity: {}", source, e.what());
  }
  return t;
}

}  // namespace dspark
