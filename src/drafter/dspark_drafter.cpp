#include "drafter/dspark_drafter.h"

#include "kernels/argmax.h"
#include "kernels/attention.h"
#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "drafter/draft_vocab.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/ops.h"
#include "model/packed_weights.h"
#include "model/rope.h"
#include "util/error.h"

namespace dspark {
namespace fs = std::filesystem;
using json = nlohmann::json;
using torch::indexing::Slice;

namespace {
constexpr int kFormatVersion = 1;
constexpr const char* kKind = "dspark-drafter";
constexpr const char* kTensorStem = "drafter";

std::string layer_name(int64_t i, const char* what) { return fmt::format("layers.{}.{}", i, what); }

}  // namespace

DSparkDrafter::DSparkDrafter(DSparkConfig config, TargetIdentity target, uint64_t seed)
    : config_(std::move(config)), target_(std::move(target)) {
  if (config_.draft_vocab_size > 0)
    fail("a drafter with a draft vocabulary of {} tokens is made from its target and d2t", config_.draft_vocab_size);
  init_parameters(seed);
}

DSparkDrafter::DSparkDrafter(DSparkConfig config, Transformer& target, uint64_t seed, const at::Tensor& d2t)
    : config_(std::move(config)), target_(TargetIdentity::of(target)) {
  const int64_t Vd = config_.draft_vocab_size;
  if (Vd > 0) {
    if (!d2t.defined()) fail("a drafter with a draft vocabulary of {} tokens needs its d2t", Vd);
    check_d2t(d2t, Vd, target_.vocab_size, "drafter");
    d2t_ = d2t.to(target.device()).contiguous();  // walk_cpu reads it through a raw pointer
    // The frozen head's rows of the draft vocabulary [Vd, H], in the target's dtype: a block then
    // reads Vd rows instead of V.
    head_rows_ = target.weights().lm_head.index_select(0, d2t_).contiguous();
  } else if (d2t.defined()) {
    fail("d2t given for a drafter without draft_vocab_size");
  }
  init_parameters(seed);
}

void DSparkDrafter::init_parameters(uint64_t seed) {
  config_.validate();
  const auto& c = config_;
  const int64_t d = c.width, H = target_.hidden_size, V = target_.vocab_size, r = c.markov_rank;
  const int64_t Vd = c.draft_vocab_size > 0 ? c.draft_vocab_size : V;  // W2's rows: the output vocabulary
  const int64_t qd = c.num_heads * c.head_dim, kvd = c.kv_heads() * c.head_dim;
  if (c.target_width && d != H) fail("drafter width {} must equal the target's hidden size {}", d, H);
  if (c.mask_token_id >= V) fail("drafter mask_token_id {} is outside the target's vocabulary of {}", c.mask_token_id, V);
  for (int64_t l : c.target_layers)
    if (c.context == ContextMode::Layers && (l < 0 || l >= target_.num_layers))
      fail("drafter target layer {} is outside the target's {} layers", l, target_.num_layers);
  torch::manual_seed(seed);
  auto normal = [&](std::vector<int64_t> shape) { return torch::randn(shape) * c.init_std; };
  auto add = [&](const std::string& name, at::Tensor t) {
    names_.push_back(name);
    params_[name] = t.to(torch::kFloat32).contiguous();
  };
  add("ctx.proj", normal({d, feature_width()}));
  add("ctx.norm", torch::ones({d}));
  if (!c.target_width) add("embed.proj", normal({d, H}));
  if (c.mask_token_id < 0) add("mask", normal({d}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    add(layer_name(i, "attn_norm"), torch::ones({d}));
    add(layer_name(i, "q_proj"), normal({qd, d}));
    add(layer_name(i, "k_proj"), normal({kvd, d}));
    add(layer_name(i, "v_proj"), normal({kvd, d}));
    add(layer_name(i, "q_norm"), torch::ones({c.head_dim}));
    add(layer_name(i, "k_norm"), torch::ones({c.head_dim}));
    add(layer_name(i, "o_proj"), normal({d, qd}));
    add(layer_name(i, "ffn_norm"), torch::ones({d}));
    add(layer_name(i, "gate_proj"), normal({c.ffn_size, d}));
    add(layer_name(i, "up_proj"), normal({c.ffn_size, d}));
    add(layer_name(i, "down_proj"), normal({d, c.ffn_size}));
  }
  add("out.norm", torch::ones({d}));
  if (!c.target_width) add("out.proj", normal({H, d}));
  if (c.markov != MarkovKind::None) {
    add("markov.w1", normal({V, r}));         // read by the previous token: target ids
    add("markov.w2", torch::zeros({Vd, r}));  // B = W1[x] W2^T starts at 0: exactly DFlash
    if (c.markov == MarkovKind::Gated) {
      add("markov.gate.weight", normal({r, d + r}));
      add("markov.gate.bias", torch::zeros({r}));
    } else if (c.markov == MarkovKind::Rnn) {
      // (gate, candidate, output) = split3(W [s_{k-1}; W1[x_{k-1}]; h_k] + b)
      add("markov.rnn.weight", normal({3 * r, 2 * r + d}));
      add("markov.rnn.bias", torch::zeros({3 * r}));
    }
  }
  if (c.confidence) {
    add("conf.weight", torch::zeros({1, d + (c.confidence_reads_markov() ? r : 0)}));
    add("conf.bias", torch::zeros({1}));
  }
  inv_freq_ = rope_inverse_frequencies(c.head_dim, c.rope_theta, RopeScaling{});
}

at::Tensor& DSparkDrafter::param(const std::string& name) const {
  auto it = params_.find(name);
  if (it == params_.end()) fail("drafter has no parameter {}", name);
  return it->second;
}

NamedParameters DSparkDrafter::named_parameters() const {
  NamedParameters out;
  for (const auto& n : names_) out.emplace_back(n, params_.at(n));
  return out;
}

int64_t DSparkDrafter::parameter_count() const {
  int64_t n = 0;
  for (const auto& [name, t] : params_) n += t.numel();
  return n;
}

std::string DSparkDrafter::fingerprint() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  const std::string config = to_json(config_).dump();
  mix(config.data(), config.size());
  for (const auto& name : names_) {
    at::Tensor t = params_.at(name).detach().to(torch::kCPU).to(torch::kBFloat16).contiguous();
    mix(t.data_ptr(), size_t(t.nbytes()));
  }
  if (d2t_.defined()) {
    at::Tensor ids = d2t_.to(torch::kCPU).contiguous();
    mix(ids.data_ptr(), size_t(ids.nbytes()));
  }
  return fmt::format("{:016x}", h);
}

void DSparkDrafter::to(c10::Device device) {
  for (auto& [name, t] : params_) {
    const bool grad = t.requires_grad();
    t = t.detach().to(device).requires_grad_(grad);
  }
  inv_freq_ = inv_freq_.to(device);
  if (d2t_.defined()) {
    d2t_ = d2t_.to(device);
    head_rows_ = head_rows_.to(device);
  }
}

int64_t DSparkDrafter::feature_width() const {
  return config_.context == ContextMode::Layers ? int64_t(config_.target_layers.size()) * target_.hidden_size
                                                : target_.hidden_size;
}

HiddenTaps DSparkDrafter::taps() const {
  HiddenTaps taps;
  if (config_.context == ContextMode::Layers)
    taps.layers = config_.target_layers;
  else
    taps.final_hidden = true;
  return taps;
}

at::Tensor DSparkDrafter::features_from(const at::Tensor& hidden) const {
  // layers: [.., m, H] -> [.., m*H]; final: [.., H] as is.
  if (config_.context == ContextMode::Layers) return hidden.flatten(-2).to(torch::kFloat32);
  return hidden.to(torch::kFloat32);
}

void DSparkDrafter::context_kv(const at::Tensor& features, const at::Tensor& positions, std::vector<at::Tensor>& keys,
                               std::vector<at::Tensor>& values) const {
  const auto& c = config_;
  // features [B, N, F] -> rows [B, N, d]
  const int64_t B = features.size(0), N = features.size(1);
  at::Tensor rows = rms_norm(dense(features.to(torch::kFloat32), param("ctx.proj")), param("ctx.norm"), c.rms_norm_eps);
  auto [cos, sin] = rope_tables(inv_freq_, positions.repeat({B}));
  keys.clear();
  values.clear();
  const int64_t nkv = c.kv_heads();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    at::Tensor k = dense(rows, param(layer_name(i, "k_proj"))).reshape({B * N, nkv, c.head_dim});
    k = apply_rope(rms_norm(k, param(layer_name(i, "k_norm")), c.rms_norm_eps), cos, sin);
    at::Tensor v = dense(rows, param(layer_name(i, "v_proj")));
    keys.push_back(k.view({B, N, nkv, c.head_dim}).permute({0, 2, 1, 3}));    // [B, nkv, N, hd]
    values.push_back(v.view({B, N, nkv, c.head_dim}).permute({0, 2, 1, 3}));  // [B, nkv, N, hd]
  }
}

at::Tensor DSparkDrafter::backbone(const Transformer& target, const std::vector<at::Tensor>& ctx_keys,
                                   const std::vector<at::Tensor>& ctx_values, const at::Tensor& ctx_allowed,
                                   const at::Tensor& anchors, const at::Tensor& anchor_tokens) const {
  const auto& c = config_;
  const int64_t B = anchors.size(0), A = anchors.size(1), g = c.block_size, d = c.width;
  const int64_t nh = c.num_heads, nkv = c.kv_heads(), group = nh / nkv, hd = c.head_dim;
  const int64_t N = ctx_keys.empty() ? 0 : ctx_keys[0].size(2);
  // Slot inputs [B, A, g, d]: the (projected) anchor embedding, then the mask vector.
  at::Tensor anchor_emb = target.embed(anchor_tokens.reshape({-1})).to(torch::kFloat32).detach();  // [B*A, H]
  at::Tensor first = (c.target_width ? anchor_emb : dense(anchor_emb, param("embed.proj"))).view({B, A, 1, d});
  at::Tensor x = torch::cat({first, mask_input(target).view({1, 1, 1, d}).expand({B, A, g - 1, d})}, 2);
  at::Tensor positions = (anchors.unsqueeze(-1) + torch::arange(g, anchors.options())).reshape({-1});  // [B*A*g]
  auto [cos, sin] = rope_tables(inv_freq_, positions);
  // Context visibility as an additive mask [B, 1, A*g, N]; none when every position is visible
  // (ctx_allowed undefined: inference in `layers` mode).
  at::Tensor ctx_mask;
  if (ctx_allowed.defined())
    ctx_mask = torch::zeros({B, A, N}, x.options())
                   .masked_fill(ctx_allowed.logical_not(), -std::numeric_limits<float>::infinity())
                   .unsqueeze(2).expand({B, A, g, N}).reshape({B, 1, A * g, N});
  const double scale = 1.0 / std::sqrt(double(hd));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    at::Tensor h = rms_norm(x, param(layer_name(i, "attn_norm")), c.rms_norm_eps);
    // -> [B, nh, A, g, hd]; key/value heads repeated for grouped-query attention
    auto heads = [&](const char* proj, const char* norm, int64_t count) {
      at::Tensor t = dense(h, param(layer_name(i, proj))).reshape({B * A * g, count, hd});
      if (norm) t = apply_rope(rms_norm(t, param(layer_name(i, norm)), c.rms_norm_eps), cos, sin);
      t = t.view({B, A, g, count, hd}).permute({0, 3, 1, 2, 4});
      return count == nh ? t : t.repeat_interleave(group, 1);
    };
    auto repeat_kv = [&](const at::Tensor& t) { return group == 1 ? t : t.repeat_interleave(group, 1); };
    at::Tensor q = heads("q_proj", "q_norm", nh), kb = heads("k_proj", "k_norm", nkv), vb = heads("v_proj", nullptr, nkv);
    // Scores against the context [B, nh, A*g, N] and within the block [B, nh, A, g, g].
    at::Tensor s_ctx = torch::matmul(q.reshape({B, nh, A * g, hd}), repeat_kv(ctx_keys[i]).transpose(-1, -2)) * scale;
    if (ctx_mask.defined()) s_ctx = s_ctx + ctx_mask;
    at::Tensor s_blk = torch::matmul(q, kb.transpose(-1, -2)) * scale;
    at::Tensor probs = torch::softmax(torch::cat({s_ctx.view({B, nh, A, g, N}), s_blk}, -1), -1);
    at::Tensor p_ctx = probs.narrow(-1, 0, N).reshape({B, nh, A * g, N});
    at::Tensor p_blk = probs.narrow(-1, N, g);
    at::Tensor out = torch::matmul(p_ctx, repeat_kv(ctx_values[i])).view({B, nh, A, g, hd}) + torch::matmul(p_blk, vb);
    out = out.permute({0, 2, 3, 1, 4}).reshape({B, A, g, nh * hd});
    x = x + dense(out, param(layer_name(i, "o_proj")));
    h = rms_norm(x, param(layer_name(i, "ffn_norm")), c.rms_norm_eps);
    x = x + dense(torch::silu(dense(h, param(layer_name(i, "gate_proj")))) * dense(h, param(layer_name(i, "up_proj"))),
                  param(layer_name(i, "down_proj")));
  }
  return rms_norm(x, param("out.norm"), c.rms_norm_eps);
}

at::Tensor DSparkDrafter::mask_input(const Transformer& target) const {
  if (config_.mask_token_id < 0) return param("mask");
  at::Tensor id = torch::full({1}, config_.mask_token_id, torch::TensorOptions().dtype(torch::kInt64).device(inv_freq_.device()));
  return target.embed(id).to(torch::kFloat32).detach().view({config_.width});
}

at::Tensor DSparkDrafter::base_logits(const Transformer& target, const at::Tensor& hidden) const {
  at::Tensor h;  // [.., H]
  if (config_.target_width) {
    h = hidden;
  } else if (packed_.count("out.proj") && hidden.device().is_cpu() && hidden.dim() == 2 && !hidden.requires_grad()) {
    const at::Tensor x = hidden.to(torch::kFloat32).contiguous();
    h = torch::empty({x.size(0), param("out.proj").size(0)});
    matmul_rows("out.proj", x.data_ptr<float>(), x.size(0), h.data_ptr<float>());
  } else {
    h = dense(hidden, param("out.proj"));
  }
  return target.logits_from_final_hidden(h.to(target.dtype()), head_rows_).to(torch::kFloat32);  // [.., Vd]
}

at::Tensor DSparkDrafter::target_distribution(const at::Tensor& q) const {
  if (!d2t_.defined()) return q;
  if (is_host_f32(q) && d2t_.device().is_cpu()) {
    // Once per sampled draft position: a loop instead of index_copy_'s dispatch.
    at::Tensor out = torch::zeros({target_.vocab_size}, q.options());  // [V]
    const float* src = q.data_ptr<float>();
    const int64_t* ids = d2t_.data_ptr<int64_t>();
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0; i < q.numel(); ++i) dst[ids[i]] = src[i];
    return out;
  }
  return torch::zeros({target_.vocab_size}, q.options()).index_copy_(0, d2t_.to(q.device()), q);  // [V]
}

DSparkDrafter::TrainOutput DSparkDrafter::forward_train(const Transformer& target, const at::Tensor& features,
                                                        const at::Tensor& anchors, const at::Tensor& anchor_tokens,
                                                        const at::Tensor& prev_tokens) const {
  const auto& c = config_;
  const int64_t B = features.size(0), N = features.size(1), g = c.block_size;
  const auto dev = features.device();
  if (!c.sample_from_anchor) fail("training supports anchor-first drafters only (sample_from_anchor)");
  std::vector<at::Tensor> keys, values;
  context_kv(features, torch::arange(N, torch::TensorOptions().dtype(torch::kInt64).device(dev)), keys, values);
  at::Tensor pos = torch::arange(N, torch::TensorOptions().dtype(torch::kInt64).device(dev)).view({1, 1, N});
  at::Tensor a = anchors.unsqueeze(-1);  // [B, A, 1]
  // Context strictly before the anchor; `final` mode sees only the position just before it.
  at::Tensor allowed = c.context == ContextMode::Layers ? (pos < a) : (pos == a - 1);
  at::Tensor h = backbone(target, keys, values, allowed, anchors, anchor_tokens);  // [B, A, g, d]
  TrainOutput out;
  out.logits = base_logits(target, h);  // [B, A, g, V]
  at::Tensor e;                         // [B, A, g, r]
  if (c.markov != MarkovKind::None) {
    e = torch::embedding(param("markov.w1"), prev_tokens);
    if (c.markov == MarkovKind::Vanilla) {
      out.logits = out.logits + dense(e, param("markov.w2"));
    } else if (c.markov == MarkovKind::Gated) {
      at::Tensor gate = torch::sigmoid(dense(torch::cat({h, e}, -1), param("markov.gate.weight"), param("markov.gate.bias")));
      out.logits = out.logits + dense(gate * e, param("markov.w2"));
    } else {
      at::Tensor s = torch::zeros({B, anchors.size(1), c.markov_rank}, h.options());
      std::vector<at::Tensor> biases;
      for (int64_t k = 0; k < g; ++k) {
        at::Tensor out_gate;
        s = rnn_step(s, e.select(2, k), h.select(2, k), out_gate);
        biases.push_back(dense(out_gate, param("markov.w2")));
      }
      out.logits = out.logits + torch::stack(biases, 2);
    }
  }
  if (c.confidence) {
    at::Tensor input = c.confidence_reads_markov() ? torch::cat({h, e}, -1) : h;
    out.conf_logits = dense(input, param("conf.weight"), param("conf.bias")).squeeze(-1);  // [B, A, g]
  }
  return out;
}

at::Tensor DSparkDrafter::rnn_step(const at::Tensor& state, const at::Tensor& prev_embedding, const at::Tensor& hidden,
                                   at::Tensor& output) const {
  // DeepSpec's GRU-like head: s_k = sigma(g) s_{k-1} + (1 - sigma(g)) tanh(c), bias from tanh(o).
  std::vector<at::Tensor> parts =
      dense(torch::cat({state, prev_embedding, hidden}, -1), param("markov.rnn.weight"), param("markov.rnn.bias"))
          .chunk(3, -1);
  at::Tensor gate = torch::sigmoid(parts[0]);
  output = torch::tanh(parts[2]);
  return gate * state + (1.0 - gate) * torch::tanh(parts[1]);
}

void DSparkDrafter::Context::truncate(int64_t n) {
  if (n >= length) return;
  for (auto& k : keys) k = k.narrow(2, 0, n);
  for (auto& v : values) v = v.narrow(2, 0, n);
  length = n;
}

DSparkDrafter::Context DSparkDrafter::new_context() const {
  Context ctx;
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(inv_freq_.device());
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    ctx.key_buffer.push_back(torch::zeros({1, config_.kv_heads(), 0, config_.head_dim}, opts));
    ctx.value_buffer.push_back(torch::zeros({1, config_.kv_heads(), 0, config_.head_dim}, opts));
    ctx.keys.push_back(ctx.key_buffer.back());
    ctx.values.push_back(ctx.value_buffer.back());
  }
  reserve_context(ctx, config_.block_size);  // room for a block's own keys/values from the start
  return ctx;
}

void DSparkDrafter::reserve_context(Context& ctx, int64_t positions) const {
  const int64_t cap = ctx.capacity();
  if (positions <= cap) return;
  const int64_t grown = std::max<int64_t>({positions, 2 * cap, 256});
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    for (auto* buffers : {&ctx.key_buffer, &ctx.value_buffer}) {
      at::Tensor& old = (*buffers)[size_t(i)];
      at::Tensor fresh = torch::zeros({1, old.size(1), grown, old.size(3)}, old.options());
      fresh.narrow(2, 0, ctx.length).copy_(old.narrow(2, 0, ctx.length));
      old = fresh;
    }
    ctx.keys[size_t(i)] = ctx.key_buffer[size_t(i)].narrow(2, 0, ctx.length);
    ctx.values[size_t(i)] = ctx.value_buffer[size_t(i)].narrow(2, 0, ctx.length);
  }
}

void DSparkDrafter::extend_context(Context& ctx, const at::Tensor& features) const {
  torch::NoGradGuard no_grad;
  const int64_t n = features.size(0);
  if (n == 0) return;
  if (features.size(-1) != feature_width())
    fail("drafter context features have width {}, expected {}", features.size(-1), feature_width());
  // Room for the new rows and for the next block's own g keys/values (block_hidden_cpu).
  reserve_context(ctx, ctx.length + n + config_.block_size);
  // On the CPU every extension takes the raw-row path, the prompt's too: through LibTorch a prompt
  // of ~60 rows cost ~14 ms on the default target (once per request, 6% of a 128-token request's
  // decoding time), the raw rows about 2 ms (bench, 12 prompts: context extension per verify
  // cycle 0.37-0.43 -> 0.14 ms).
  if (features.device().is_cpu() && cpu_fast_paths_enabled()) {
    context_kv_cpu(features.to(torch::kFloat32).contiguous(), ctx);
  } else {
    std::vector<at::Tensor> keys, values;
    at::Tensor positions =
        torch::arange(ctx.length, ctx.length + n, torch::TensorOptions().dtype(torch::kInt64).device(features.device()));
    context_kv(features.unsqueeze(0), positions, keys, values);
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      ctx.key_buffer[size_t(i)].narrow(2, ctx.length, n).copy_(keys[size_t(i)]);
      ctx.value_buffer[size_t(i)].narrow(2, ctx.length, n).copy_(values[size_t(i)]);
    }
  }
  ctx.length += n;
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    ctx.keys[size_t(i)] = ctx.key_buffer[size_t(i)].narrow(2, 0, ctx.length);
    ctx.values[size_t(i)] = ctx.value_buffer[size_t(i)].narrow(2, 0, ctx.length);
  }
}

DSparkDrafter::Draft DSparkDrafter::draft(const Transformer& target, const Context& ctx, int64_t anchor_token, int64_t n,
                                          const SamplingParams& params, Rng* rng, const std::vector<int64_t>* forced) const {
  torch::NoGradGuard no_grad;
  const auto& c = config_;
  if (n < 1 || n > c.max_drafts())
    fail("cannot draft {} tokens with a block size of {} ({} drafts per block)", n, c.block_size, c.max_drafts());
  const int64_t first_slot = c.sample_from_anchor ? 0 : 1;  // the slot that predicts x_1
  if (!params.greedy() && !rng) fail("sampled drafting needs a random generator");
  const auto dev = inv_freq_.device();
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(dev);
  const int64_t N = ctx.length;
  at::Tensor anchors = torch::full({1, 1}, N, i64);
  at::Tensor h;  // [n, d]
  if (dev.is_cpu() && c.context == ContextMode::Layers && cpu_fast_paths_enabled()) {
    h = block_hidden_cpu(target, ctx, anchor_token).narrow(0, first_slot, n);
  } else {
    // `layers`: the block sees every context position (no mask); `final`: only the last one.
    at::Tensor allowed;
    if (c.context == ContextMode::Final) allowed = torch::arange(N, i64).view({1, 1, N}) == N - 1;
    h = backbone(target, ctx.keys, ctx.values, allowed, anchors, torch::full({1, 1}, anchor_token, i64))
            .view({c.block_size, c.width}).narrow(0, first_slot, n);
  }
  at::Tensor U = base_logits(target, h);                               // [n, Vd]

  if (U.device().is_cpu() && (c.markov == MarkovKind::None || c.markov == MarkovKind::Vanilla))
    return walk_cpu(U, h, anchor_token, params, rng, forced);

  // The general walk (any head, any device). The previous token stays a tensor on the device
  // ([1] int64) so that greedy drafting on a GPU never waits: the argmaxes and confidence logits
  // come back in one copy after the block. A sampled draw is made on the host (the seeded Rng),
  // so each sampled position copies its distribution q_k [V] over.
  Draft out;
  std::vector<at::Tensor> rows, picked, conf;  // [V] logits, [1] ids, [1] z per position
  const auto i64_opts = torch::TensorOptions().dtype(torch::kInt64).device(U.device());
  at::Tensor prev = torch::full({1}, anchor_token, i64_opts);
  at::Tensor state;  // rnn Markov state [r]
  if (c.markov == MarkovKind::Rnn) state = torch::zeros({c.markov_rank}, U.options());
  for (int64_t k = 0; k < n; ++k) {
    at::Tensor logits = U[k];
    at::Tensor e;
    if (c.markov != MarkovKind::None) {
      e = param("markov.w1").index_select(0, prev)[0];  // W1[x_{k-1}], [r]
      if (c.markov == MarkovKind::Vanilla) {
        logits = logits + dense(e.unsqueeze(0), param("markov.w2"))[0];
      } else if (c.markov == MarkovKind::Gated) {
        at::Tensor gate = torch::sigmoid(dense(torch::cat({h[k], e}).unsqueeze(0), param("markov.gate.weight"),
                                               param("markov.gate.bias"))[0]);
        logits = logits + dense((gate * e).unsqueeze(0), param("markov.w2"))[0];
      } else {
        at::Tensor out_gate;
        state = rnn_step(state, e, h[k], out_gate);
        logits = logits + dense(out_gate.unsqueeze(0), param("markov.w2"))[0];
      }
    }
    rows.push_back(logits);
    if (forced) {
      prev = torch::full({1}, forced->at(size_t(k)), i64_opts);
      if (!params.greedy()) {
        at::Tensor q = processed_probabilities(logits, params).to(torch::kCPU);  // [Vd]
        sample_index(q, *rng);  // the draw is made (and replaced), as in the CPU walk
        out.q.push_back(target_distribution(q));
      }
    } else if (params.greedy()) {
      prev = logits.argmax().view({1});
      if (d2t_.defined()) prev = d2t_.index_select(0, prev);  // draft id -> target id, on the device
    } else {
      at::Tensor q = processed_probabilities(logits, params).to(torch::kCPU);  // [Vd]
      prev = torch::full({1}, target_id(sample_index(q, *rng)), i64_opts);
      out.q.push_back(target_distribution(q));  // [V], 0 outside the draft vocabulary
    }
    picked.push_back(prev);
    if (c.confidence) {
      at::Tensor input = c.confidence_reads_markov() ? torch::cat({h[k], e}) : h[k];
      conf.push_back(dense(input.unsqueeze(0), param("conf.weight"), param("conf.bias")).view({1}).to(torch::kFloat64));
    }
  }
  // One device -> host copy: ids [n] and (as float64) confidence logits [n].
  std::vector<at::Tensor> parts = {torch::cat(picked).to(torch::kFloat64)};
  if (c.confidence) parts.push_back(torch::cat(conf));
  const at::Tensor host = torch::cat(parts).to(torch::kCPU).contiguous();  // [n] or [2n]
  const double* v = host.data_ptr<double>();
  for (int64_t k = 0; k < n; ++k) out.tokens.push_back(int64_t(v[k]));
  if (c.confidence)
    for (int64_t k = 0; k < n; ++k) {
      const double z = v[n + k];
      out.conf_logits.push_back(z);
      out.confidence.push_back(1.0 / (1.0 + std::exp(-z)));
    }
  out.logits = torch::stack(rows);
  return out;
}

namespace {

// The fastest path that multiplies bf16 weights with float32 inputs exactly (widening; the
// AVX512-BF16 dot product would round the inputs to bf16).
kernels::Isa widening_isa() {
  static const kernels::Isa isa =
      kernels::best_isa() == kernels::Isa::Avx512Bf16 ? kernels::Isa::Avx512 : kernels::best_isa();
  return isa;
}

// Row-wise helpers of block_hidden_cpu (float32, contiguous rows).
void rms_norm_rows(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r, x += n, y += n) {
    float sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
    const float scale = 1.0f / std::sqrt(sum_sq / float(n) + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * scale);
  }
}

// RoPE (rotate-half) in place on one head vector of hd floats; cos/sin [hd].
void rope_row(float* x, int64_t hd, const float* cos, const float* sin) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i + half] + a * sin[i + half];
  }
}

// RoPE tables as rope_tables() for positions position0 .. position0 + n - 1: angle = pos *
// inv_freq, halves repeated; cos/sin [n, hd].
void rope_rows(const float* inv_freq, int64_t position0, int64_t n, int64_t hd, float* cos, float* sin) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < hd; ++i) {
      const float angle = float(position0 + t) * inv_freq[i % (hd / 2)];
      cos[t * hd + i] = std::cos(angle);
      sin[t * hd + i] = std::sin(angle);
    }
}

}  // namespace

// backbone() for one block at inference on the CPU, on raw float32 rows: the same arithmetic
// (anchor slot + mask slots, per layer: norm, q/k/v with q/k norms and RoPE, attention over every
// context position plus the whole block, output projection, SwiGLU MLP; output norm) without
// ~80 LibTorch operators whose dispatch overhead exceeded the arithmetic. Returns [g, d].
at::Tensor DSparkDrafter::block_hidden_cpu(const Transformer& target, const Context& ctx, int64_t anchor_token) const {
  const auto& c = config_;
  const int64_t g = c.block_size, d = c.width, nh = c.num_heads, hd = c.head_dim, qd = nh * hd, F = c.ffn_size;
  const int64_t nkv = c.kv_heads(), kvd = nkv * hd;
  const int64_t N = ctx.length;
  const float eps = float(c.rms_norm_eps);
  auto ptr = [&](const std::string& name) { return param(name).data_ptr<float>(); };
  auto buffer = [](int64_t n) { return std::vector<float>(static_cast<size_t>(n)); };

  // Slot inputs [g, d]: the (projected) anchor embedding, then the mask vector.
  const at::Tensor anchor_emb =
      target.embed(torch::full({1}, anchor_token, torch::kInt64)).to(torch::kFloat32).contiguous();  // [1, H]
  const at::Tensor mask = mask_input(target).contiguous();
  at::Tensor out = torch::empty({g, d});
  float* x = out.data_ptr<float>();  // the residual stream, [g, d]
  if (c.target_width)
    std::copy(anchor_emb.data_ptr<float>(), anchor_emb.data_ptr<float>() + d, x);
  else
    matmul_rows("embed.proj", anchor_emb.data_ptr<float>(), 1, x);
  for (int64_t k = 1; k < g; ++k) std::copy(mask.data_ptr<float>(), mask.data_ptr<float>() + d, x + k * d);

  // RoPE tables for positions N .. N+g-1, as rope_tables(): angle = pos * inv_freq, halves repeated.
  std::vector<float> cos = buffer(g * hd), sin = buffer(g * hd);
  rope_rows(inv_freq_.data_ptr<float>(), N, g, hd, cos.data(), sin.data());

  std::vector<float> h = buffer(g * d), q = buffer(g * qd), kb = buffer(g * kvd), vb = buffer(g * kvd);
  std::vector<float> att = buffer(g * qd), tmp = buffer(g * d), gate = buffer(g * F), up = buffer(g * F);
  const int64_t cap = ctx.capacity();
  if (cap < N + g || !ctx.key_buffer[0].is_contiguous())
    fail("internal: the drafter context has no room for a block ({} of {} positions)", N + g, cap);
  const float scale = float(1.0 / std::sqrt(double(hd)));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    rms_norm_rows(x, g, d, ptr(layer_name(l, "attn_norm")), eps, h.data());
    matmul_rows(layer_name(l, "q_proj"), h.data(), g, q.data());
    matmul_rows(layer_name(l, "k_proj"), h.data(), g, kb.data());
    matmul_rows(layer_name(l, "v_proj"), h.data(), g, vb.data());
    const float* q_norm = ptr(layer_name(l, "q_norm"));
    const float* k_norm = ptr(layer_name(l, "k_norm"));
    for (int64_t k = 0; k < g; ++k) {
      for (int64_t j = 0; j < nh; ++j) {
        float* qh = q.data() + (k * nh + j) * hd;
        rms_norm_rows(qh, 1, hd, q_norm, eps, qh);
        rope_row(qh, hd, cos.data() + k * hd, sin.data() + k * hd);
      }
      for (int64_t j = 0; j < nkv; ++j) {
        float* kh = kb.data() + (k * nkv + j) * hd;
        rms_norm_rows(kh, 1, hd, k_norm, eps, kh);
        rope_row(kh, hd, cos.data() + k * hd, sin.data() + k * hd);
      }
    }
    // Attention: each slot sees all N context positions and all g slots; query head j reads
    // key/value head j / group. The block's own keys/values go just past the context in its
    // buffers ([1, nkv, capacity, hd], room reserved by extend_context; scratch that the next
    // append overwrites), so the kernel reads [nkv, N + g, hd] with a head stride of capacity * hd;
    // position0 = N + g - 1 makes every key visible to every slot.
    float* keys_all = ctx.key_buffer[size_t(l)].data_ptr<float>();
    float* values_all = ctx.value_buffer[size_t(l)].data_ptr<float>();
    for (int64_t jk = 0; jk < nkv; ++jk)
      for (int64_t k = 0; k < g; ++k) {
        std::copy_n(kb.data() + (k * nkv + jk) * hd, hd, keys_all + (jk * cap + N + k) * hd);
        std::copy_n(vb.data() + (k * nkv + jk) * hd, hd, values_all + (jk * cap + N + k) * hd);
      }
    kernels::AttentionShape shape;
    shape.tokens = g;
    shape.heads = nh;
    shape.kv_heads = nkv;
    shape.head_dim = hd;
    shape.keys = N + g;
    shape.position0 = N + g - 1;
    shape.scale = scale;
    kernels::attention_f32(shape, q.data(), keys_all, values_all, cap * hd, att.data());
    matmul_rows(layer_name(l, "o_proj"), att.data(), g, tmp.data());
    for (int64_t i = 0; i < g * d; ++i) x[i] += tmp[size_t(i)];
    rms_norm_rows(x, g, d, ptr(layer_name(l, "ffn_norm")), eps, h.data());
    matmul_rows(layer_name(l, "gate_proj"), h.data(), g, gate.data());
    matmul_rows(layer_name(l, "up_proj"), h.data(), g, up.data());
    kernels::silu_f32(gate.data(), gate.data(), g * F);
    for (int64_t i = 0; i < g * F; ++i) gate[size_t(i)] *= up[size_t(i)];  // silu(gate) * up
    matmul_rows(layer_name(l, "down_proj"), gate.data(), g, tmp.data());
    for (int64_t i = 0; i < g * d; ++i) x[i] += tmp[size_t(i)];
  }
  rms_norm_rows(x, g, d, ptr("out.norm"), eps, x);
  return out;
}

// context_kv() for a few new rows on the CPU (speculative decoding's commit of <= g + 1 tokens) on
// raw float32 rows, written straight into the context's buffers. features [n, F] contiguous.
void DSparkDrafter::context_kv_cpu(const at::Tensor& features, Context& ctx) const {
  const auto& c = config_;
  const int64_t n = features.size(0), d = c.width, nh = c.kv_heads(), hd = c.head_dim;
  const int64_t qd = nh * hd;  // key/value heads only
  const int64_t position0 = ctx.length, cap = ctx.capacity();
  if (cap < position0 + n) fail("internal: the drafter context has no room for {} rows", n);
  const float eps = float(c.rms_norm_eps);
  auto ptr = [&](const std::string& name) { return param(name).data_ptr<float>(); };
  std::vector<float> rows(static_cast<size_t>(n * d)), k(static_cast<size_t>(n * qd)), v(static_cast<size_t>(n * qd));
  matmul_rows("ctx.proj", features.data_ptr<float>(), n, rows.data());
  rms_norm_rows(rows.data(), n, d, ptr("ctx.norm"), eps, rows.data());
  std::vector<float> cos(static_cast<size_t>(n * hd)), sin(static_cast<size_t>(n * hd));
  rope_rows(inv_freq_.data_ptr<float>(), position0, n, hd, cos.data(), sin.data());
  for (int64_t l = 0; l < c.num_layers; ++l) {
    matmul_rows(layer_name(l, "k_proj"), rows.data(), n, k.data());
    matmul_rows(layer_name(l, "v_proj"), rows.data(), n, v.data());
    const float* k_norm = ptr(layer_name(l, "k_norm"));
    float* kt = ctx.key_buffer[size_t(l)].data_ptr<float>();    // [1, nh, cap, hd]
    float* vt = ctx.value_buffer[size_t(l)].data_ptr<float>();
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < nh; ++j) {
        float* kh = k.data() + (t * nh + j) * hd;
        rms_norm_rows(kh, 1, hd, k_norm, eps, kh);
        rope_row(kh, hd, cos.data() + t * hd, sin.data() + t * hd);
        std::copy(kh, kh + hd, kt + (j * cap + position0 + t) * hd);
        const float* vh = v.data() + (t * nh + j) * hd;
        std::copy(vh, vh + hd, vt + (j * cap + position0 + t) * hd);
      }
  }
}

// The sequential walk for the `none` and `vanilla` heads on the CPU, on raw float32 rows: the
// LibTorch version spends most of its time in per-position operator overhead (index, add, argmax,
// item, cat: ~10 ops x g), which costs more than the arithmetic. Same values as the general walk.
DSparkDrafter::Draft DSparkDrafter::walk_cpu(const at::Tensor& base_logits, const at::Tensor& hidden,
                                             int64_t anchor_token, const SamplingParams& params, Rng* rng,
                                             const std::vector<int64_t>* forced) const {
  const auto& c = config_;
  const int64_t n = base_logits.size(0), V = base_logits.size(1), d = hidden.size(1);  // V: Vd columns
  const bool markov = c.markov == MarkovKind::Vanilla;
  const int64_t r = markov ? c.markov_rank : 0;
  auto f32 = [](const at::Tensor& t) { return t.to(torch::kFloat32).contiguous(); };
  Draft out;
  out.logits = base_logits.to(torch::kFloat32).clone().contiguous();  // [n, Vd], the Markov bias is added in place
  const at::Tensor h = f32(hidden);                                    // [n, d]
  const at::Tensor w1 = markov ? f32(param("markov.w1")) : at::Tensor();  // [V, r], by target id
  const at::Tensor w2 = markov ? f32(param("markov.w2")) : at::Tensor();  // [Vd, r]
  const int64_t* d2t = d2t_.defined() ? d2t_.data_ptr<int64_t>() : nullptr;  // draft id -> target id
  const at::Tensor conf_w = c.confidence ? f32(param("conf.weight")) : at::Tensor();  // [1, d + r]
  const double conf_b = c.confidence ? param("conf.bias").item<double>() : 0.0;
  int64_t prev = anchor_token;
  std::vector<float> bias(static_cast<size_t>(markov ? V : 0));  // B_k = W1[x_{k-1}] W2^T, [Vd]
  for (int64_t k = 0; k < n; ++k) {
    float* row = out.logits.data_ptr<float>() + k * V;
    const float* e = markov ? w1.data_ptr<float>() + prev * r : nullptr;  // W1[x_{k-1}], [r]
    if (markov) {
      if (packed_.count("markov.w2"))
        matmul_rows("markov.w2", e, 1, bias.data());
      else if (walk_w2_bf16_.defined())
        kernels::matmul_bf16_with(walk_isa_, e, r, 1, r, reinterpret_cast<const uint16_t*>(walk_w2_bf16_.data_ptr()),
                                  r, V, bias.data(), V);
      else
        kernels::matmul_f32(e, 1, r, w2.data_ptr<float>(), V, bias.data());
      kernels::axpy_f32(1.0f, bias.data(), row, V);
    }
    int64_t token;  // a draft id, then its target id
    if (params.greedy()) {
      token = kernels::argmax_f32(row, V).index;  // first maximum, as argmax
    } else {
      at::Tensor q = processed_probabilities(out.logits[k], params);  // [Vd]
      token = sample_index(q, *rng);
      out.q.push_back(target_distribution(q));
    }
    if (d2t) token = d2t[token];
    if (forced) token = forced->at(size_t(k));
    if (c.confidence) {
      // z_k = w . [h_k; e_k] + b
      const float* w = conf_w.data_ptr<float>();
      const float* hk = h.data_ptr<float>() + k * d;
      double z = conf_b;
      for (int64_t i = 0; i < d; ++i) z += double(w[i]) * hk[i];
      if (c.confidence_reads_markov())
        for (int64_t i = 0; i < r; ++i) z += double(w[d + i]) * e[i];
      out.conf_logits.push_back(z);
      out.confidence.push_back(1.0 / (1.0 + std::exp(-z)));
    }
    out.tokens.push_back(token);
    prev = token;
  }
  return out;
}

void DSparkDrafter::matmul_rows(const std::string& name, const float* x, int64_t m, float* y) const {
  const at::Tensor& w = param(name);  // [n, k] float32
  const int64_t n = w.size(0), k = w.size(1);
  auto it = packed_.find(name);
  if (it != packed_.end())
    kernels::matmul_bf16_packed(x, k, m, it->second, y, n);
  else
    kernels::matmul_f32(x, m, k, w.data_ptr<float>(), n, y);
}

// ---- persistence ----

void DSparkDrafter::save(const std::string& dir, c10::ScalarType dtype) const {
  fs::create_directories(dir);
  std::vector<at::Tensor> keep;
  std::vector<io::TensorToWrite> tensors;
  for (const auto& name : names_) {
    at::Tensor t = params_.at(name).detach().to(torch::kCPU).to(dtype).contiguous();
    keep.push_back(t);
    tensors.push_back({name, dtype == torch::kBFloat16 ? io::DType::BF16 : io::DType::F32, t.sizes().vec(),
                       t.data_ptr(), size_t(t.nbytes())});
  }
  if (d2t_.defined()) {  // a full-vocabulary drafter writes exactly what it wrote before d2t existed
    at::Tensor ids = d2t_.to(torch::kCPU).contiguous();
    keep.push_back(ids);
    tensors.push_back({kD2tTensor, io::DType::I64, ids.sizes().vec(), ids.data_ptr(), size_t(ids.nbytes())});
  }
  io::write_safetensors_dir(dir, tensors, {{"format", "pt"}}, 0, kTensorStem);
  json meta = {{"kind", kKind},
               {"version", kFormatVersion},
               {"config", to_json(config_)},
               {"target", to_json(target_)},
               {"dims", {{"vocab_size", target_.vocab_size}, {"hidden_size", target_.hidden_size},
                         {"feature_width", feature_width()}}},
               {"parameters", names_},
               {"parameter_count", parameter_count()}};
  io::write_text_atomic((fs::path(dir) / "dspark.json").string(), meta.dump(2) + "\n");
}

std::unique_ptr<DSparkDrafter> DSparkDrafter::load(const std::string& dir, Transformer& target) {
  const fs::path meta_path = fs::path(dir) / "dspark.json";
  if (!fs::is_directory(dir)) fail("drafter directory '{}' does not exist", dir);
  if (!fs::exists(meta_path)) fail("'{}' is not a DSpark drafter directory (no dspark.json)", dir);
  json meta = json::parse(io::read_text_file(meta_path.string()), nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) fail("{}: not valid JSON", meta_path.string());
  if (meta.value("kind", std::string()) != kKind) fail("{}: kind is not '{}'", meta_path.string(), kKind);
  if (meta.value("version", 0) != kFormatVersion)
    fail("{}: unsupported drafter format version {}", meta_path.string(), meta.value("version", 0));
  if (!meta.contains("config") || !meta.contains("target")) fail("{}: missing config or target", meta_path.string());
  DSparkConfig config = dspark_config_from_json(meta["config"], meta_path.string());
  const TargetIdentity made_for = target_identity_from_json(meta["target"], meta_path.string());
  const TargetIdentity actual = TargetIdentity::of(target);
  if (!(made_for == actual)) {
    std::string why = made_for.architecture != actual.architecture ? "architecture " + made_for.architecture + " vs " + actual.architecture
                      : made_for.vocab_size != actual.vocab_size   ? fmt::format("vocabulary {} vs {}", made_for.vocab_size, actual.vocab_size)
                      : made_for.hidden_size != actual.hidden_size ? fmt::format("hidden size {} vs {}", made_for.hidden_size, actual.hidden_size)
                      : made_for.num_layers != actual.num_layers   ? fmt::format("{} layers vs {}", made_for.num_layers, actual.num_layers)
                                                                   : "embedding/LM-head weights differ";
    fail("drafter '{}' was made for another target ({})", dir, why);
  }
  const io::TensorStore store = io::TensorStore::open(dir, kTensorStem);
  at::Tensor d2t;
  if (config.draft_vocab_size > 0)
    d2t = read_d2t(store, config.draft_vocab_size, actual.vocab_size);
  else if (store.contains(kD2tTensor))
    fail("{}: tensor {} present but {} sets no draft_vocab_size", store.get(kD2tTensor).file, kD2tTensor,
         meta_path.string());
  return from_parameters(
      config, target,
      [&](const std::string& name, const std::vector<int64_t>& shape) { return read_float_tensor(store, name, shape); },
      d2t);
}

at::Tensor read_float_tensor(const io::TensorStore& store, const std::string& name, const std::vector<int64_t>& shape) {
  if (!store.contains(name)) fail("{}: missing tensor {}", store.location(), name);
  const io::TensorView& view = store.get(name);
  if (view.shape != shape)
    fail("{}: tensor {} has shape [{}], expected [{}]", view.file, name, fmt::join(view.shape, ", "), fmt::join(shape, ", "));
  at::Tensor src;
  if (view.dtype == io::DType::F32)
    src = torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kFloat32);
  else if (view.dtype == io::DType::BF16)
    src = torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kBFloat16);
  else if (view.dtype == io::DType::F16)
    src = torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kFloat16);
  else
    fail("{}: tensor {} must be F32, BF16 or F16, not {}", view.file, name, io::dtype_name(view.dtype));
  at::Tensor out = src.to(torch::kFloat32).clone();
  if (!torch::isfinite(out).all().item<bool>()) fail("{}: tensor {} holds NaN or infinity", view.file, name);
  return out;
}

std::unique_ptr<DSparkDrafter> DSparkDrafter::with_draft_vocab(Transformer& target, const at::Tensor& d2t) const {
  if (d2t_.defined()) fail("the drafter already has a draft vocabulary of {} tokens", config_.draft_vocab_size);
  if (!(TargetIdentity::of(target) == target_)) fail("with_draft_vocab: the drafter was made for another target");
  DSparkConfig reduced = config_;
  reduced.draft_vocab_size = d2t.numel();
  if (reduced.draft_vocab_size < 1 || reduced.draft_vocab_size >= target_.vocab_size)
    fail("a draft vocabulary must hold 1 to {} tokens, not {}", target_.vocab_size - 1, reduced.draft_vocab_size);
  check_d2t(d2t, reduced.draft_vocab_size, target_.vocab_size, "draft vocabulary");
  const at::Tensor ids = d2t.to(torch::kInt64).to(inv_freq_.device());
  auto cut = from_parameters(reduced, target, [&](const std::string& name, const std::vector<int64_t>&) {
    const at::Tensor& p = param(name);
    return name == "markov.w2" ? p.index_select(0, ids).to(torch::kCPU).contiguous() : p.to(torch::kCPU);
  }, d2t.to(torch::kInt64).contiguous());
  cut->cut_from_ = calibration_fingerprint();
  return cut;
}

std::unique_ptr<DSparkDrafter> DSparkDrafter::from_parameters(DSparkConfig config, Transformer& target,
                                                              const ParameterSource& source, const at::Tensor& d2t) {
  auto drafter = std::make_unique<DSparkDrafter>(std::move(config), target, 0, d2t);
  for (const auto& name : drafter->names_) {
    at::Tensor& p = drafter->params_.at(name);
    at::Tensor value = source(name, p.sizes().vec());
    if (value.sizes() != p.sizes()) fail("drafter parameter {} has the wrong shape", name);
    p = value.to(torch::kFloat32).contiguous();
  }
  drafter->to(target.device());
  // Drafters stored in bf16 have a bf16-exact W2: the walk can read half the bytes per position
  // with the same float32 products (kernels' widening path). When W1 is bf16-exact too, its rows
  // lose nothing to the AVX512-BF16 dot product's input rounding, which is faster still (products
  // exact, float32 sums in another order).
  auto bf16_exact = [](const at::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kFloat32).equal(t); };
  if (drafter->config_.markov == MarkovKind::Vanilla && target.device().is_cpu()) {
    const at::Tensor& w2 = drafter->param("markov.w2");
    if (bf16_exact(w2)) {
      drafter->walk_w2_bf16_ = w2.to(torch::kBFloat16).contiguous();
      drafter->walk_isa_ = bf16_exact(drafter->param("markov.w1")) ? kernels::best_isa() : widening_isa();
    }
  }
  // Decoding on the CPU reads every projection once per block: with bf16 weights (as stored) the
  // packed kernel reads half the bytes of float32 and needs no horizontal sums. With AVX512-BF16
  // its inputs are rounded to bf16, as a bf16 drafter computes (drafts may differ in the last bits
  // of their logits; verification keeps the output exact either way). DSPARK_PACKED_WEIGHTS=0
  // keeps float32.
  if (target.device().is_cpu() && packed_weights_enabled()) {
    for (const auto& name : drafter->names_) {
      const at::Tensor& w = drafter->param(name);
      const bool projection = name == "markov.w2" || name.ends_with("proj");
      if (!projection || w.dim() != 2 || !bf16_exact(w)) continue;  // float32 weights stay exact
      const at::Tensor b = w.to(torch::kBFloat16).contiguous();
      auto it = drafter->packed_.emplace(
          name, kernels::pack_bf16(reinterpret_cast<const uint16_t*>(b.data_ptr()), b.size(1), b.size(0), b.size(1))).first;
      // Beside a target that streams its weights, the drafter's are evicted between two blocks and
      // read from memory again: prefetching them too took the drafter's time per verify cycle 8%
      // lower on the default target (bench, three alternating runs of 12 prompts).
      it->second.streamed = target.weights_streamed();
    }
  }
  return drafter;
}

}  // namespace dspark
