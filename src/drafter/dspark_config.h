// DSpark drafter configuration (a plain struct) and the identity of the target it is made for.
//
// The drafter predicts a block of g tokens after an anchor token x0 in one parallel pass of a
// small bidirectional transformer fed by the target's hidden states, then a sequential Markov head
// adds B_k = W1[x_{k-1}] W2 to each position's logits, and a confidence head estimates the
// probability c_k that position k survives verification. Markov `none` + no confidence head is
// the DFlash baseline.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dspark {

class Transformer;

enum class MarkovKind { None, Vanilla, Gated, Rnn };
enum class ContextMode {
  Final,   // one context token: the target's final post-norm hidden just before the anchor
  Layers,  // hidden states of several target layers over the whole prefix, as extra keys/values
};

struct DSparkConfig {
  int64_t block_size = 7;  // g: draft positions per block (verify <= g + 1 tokens)
  int64_t width = 256;     // d: backbone width
  int64_t num_layers = 2;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 0;  // key/value heads (grouped-query attention); 0 = num_heads
  int64_t head_dim = 64;
  int64_t ffn_size = 512;
  MarkovKind markov = MarkovKind::Vanilla;
  int64_t markov_rank = 64;  // r
  bool confidence = true;
  ContextMode context = ContextMode::Layers;
  std::vector<int64_t> target_layers;  // 0-based target layers read in `layers` mode
  // DeepSpec layout: the backbone width is the target's hidden size; slot inputs are the target's
  // embeddings as they are and the output norm feeds the target's LM head directly (no
  // `embed.proj` / `out.proj`).
  bool target_width = false;
  // >= 0: the mask slots hold the target's (frozen) embedding of this token, as DeepSpec and
  // z-lab do; -1: a learned vector `mask`.
  int64_t mask_token_id = -1;
  // The confidence head reads [h_k; W1[x_{k-1}]] (true, when there is a Markov head) or h_k alone.
  bool confidence_with_markov = true;
  // true (DeepSpec, anchor-first): slot k predicts the token k+1 places after the anchor, g drafts
  // per block. false (z-lab DFlash): slot k >= 1 predicts the token at its own position, g-1 drafts.
  bool sample_from_anchor = true;
  // Vd > 0: the drafter predicts only Vd target tokens (its `d2t` map, drafter/draft_vocab.h): the
  // LM-head rows it multiplies and Markov W2 are [Vd, ..]; 0: the target's whole vocabulary.
  int64_t draft_vocab_size = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  double init_std = 0.02;

  int64_t kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  // Drafts one block yields: g anchor-first, g - 1 in z-lab's convention.
  int64_t max_drafts() const { return sample_from_anchor ? block_size : block_size - 1; }
  // Whether the confidence head reads W1[x_{k-1}] besides h_k.
  bool confidence_reads_markov() const { return confidence && confidence_with_markov && markov != MarkovKind::None; }

  // Throws dspark::Error for inconsistent values.
  void validate() const;
  // The DFlash layer rule: `count` layers spread evenly over 1 .. L-3 (never the last layers).
  static std::vector<int64_t> dflash_layers(int64_t target_layers, int64_t count = 5);
};

// What a drafter needs to know of its target, and what identifies it: a drafter made for another
// target (other sizes, or the same sizes with other embedding / head weights) is refused.
struct TargetIdentity {
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  std::string fingerprint;  // hash of (a sample of) the embedding and LM-head weights, as bf16

  static TargetIdentity of(Transformer& target);
  bool operator==(const TargetIdentity&) const = default;
};

struct ModelConfig;
// DeepSpec's drafter layout for `target` (train --layout deepspec, init-random --drafter-for):
// the target's width, heads, KV heads, head dim, FFN size, RoPE base and norm epsilon; mask slots
// hold the target's embedding of `mask_token_id`; `layers` context (DFlash layers when none are
// set). Block size, layer count and heads (Markov, confidence) stay as `config` has them.
void apply_deepspec_layout(DSparkConfig& config, const ModelConfig& target, int64_t mask_token_id);

const char* markov_kind_name(MarkovKind kind);
MarkovKind parse_markov_kind(const std::string& name);  // none | vanilla | gated | rnn
const char* context_mode_name(ContextMode mode);
ContextMode parse_context_mode(const std::string& name);  // final | layers

nlohmann::json to_json(const DSparkConfig& config);
DSparkConfig dspark_config_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json to_json(const TargetIdentity& target);
TargetIdentity target_identity_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace dspark
