#include "model/transformer.h"

#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "kernels/attention.h"
#include "model/device.h"
#include "model/ops.h"
#include "model/rope.h"
#include "util/error.h"

namespace dspark {

// A chunk's rows in the flattened [N, H] activations, and where its keys/values go.
struct Transformer::Segment {
  int64_t row_begin = 0;
  int64_t length = 0;       // T
  int64_t position0 = 0;    // position of the first token (= cache length before the chunk)
  KVCache* cache = nullptr; // nullptr: attend within the chunk only
};

namespace {

// New tokens per chunk up to which cached attention uses the fused CPU kernel (decode/verify).
constexpr int64_t kFastAttentionMaxTokens = 8;  // beyond, LibTorch's batched GEMMs win (bench)

// Visibility of keys (positions 0..S-1) from queries at positions position0 .. position0+T-1:
// causal, and within the last `window` positions for sliding layers. [T, S] bool.
at::Tensor attention_mask(int64_t position0, int64_t T, int64_t S, int64_t window, c10::Device dev) {
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(dev);
  at::Tensor q_pos = torch::arange(position0, position0 + T, opts).unsqueeze(1);
  at::Tensor k_pos = torch::arange(0, S, opts).unsqueeze(0);
  at::Tensor allowed = k_pos <= q_pos;
  if (window > 0) allowed = allowed & (k_pos > q_pos - window);
  return allowed;
}

// The architecture's RMSNorm: w * normed (Llama, Qwen), normed * (1 + w) (Gemma2/3) or normed * w
// in float32 (Gemma4).
at::Tensor norm(const ModelConfig& c, const at::Tensor& x, const at::Tensor& w) {
  if (c.norm_scale_f32) return rms_norm_f32_scale(x, w, c.rms_norm_eps);
  return rms_norm(x, w, c.rms_norm_eps, c.gemma_norm);
}

template <typename Segments>
bool uniform_without_cache(const Segments& segments) {
  for (const auto& seg : segments)
    if (seg.cache || seg.position0 != 0 || seg.length != segments[0].length) return false;
  return true;
}

}  // namespace

Transformer::Transformer(ModelConfig config, ModelWeights weights, c10::Device device)
    : config_(std::move(config)), weights_(std::move(weights)), device_(device),
      dtype_(weights_.final_norm.scalar_type()) {  // activations: as the norms (float32 when mixed)
  // One RoPE per attention kind (config.h: Gemma3/4 give sliding layers their own; Gemma4's
  // full layers have their own head dim too).
  inv_freq_global_ = rope_inverse_frequencies(config_.head_dim_of_kind(false), config_.rope_theta,
                                              config_.rope_scaling).to(device_);
  inv_freq_local_ = rope_inverse_frequencies(config_.head_dim_of_kind(true), config_.rope_local_theta,
                                             config_.rope_local_scaling).to(device_);
  kv_read_by_later_layers_.assign(size_t(config_.num_layers), false);
  for (int64_t l = 0; l < config_.num_layers; ++l)
    if (config_.kv_shared(l)) kv_read_by_later_layers_[size_t(config_.kv_source(l))] = true;
  const bool ple = config_.per_layer_size > 0;
  if (ple != weights_.embed_per_layer.defined())
    fail("model weights {} per-layer embeddings but the config has hidden_size_per_layer_input = {}",
         ple ? "lack" : "have", config_.per_layer_size);
  // Every matrix dense() multiplies: all 2-D weights but the embedding tables (only rows of them
  // are read, unless the embedding is also the LM head).
  std::vector<at::Tensor> matrices;
  for (auto& [name, t] : weights_.named()) {
    if (!t->defined() || t->dim() != 2 || t->is_same(weights_.embed_per_layer)) continue;
    if (t->is_same(weights_.embed) && !(weights_.lm_head.defined() && weights_.lm_head.is_same(weights_.embed))) continue;
    matrices.push_back(*t);
  }
  packed_ = PackedWeights(matrices);
}

std::unique_ptr<Transformer> Transformer::load(const std::string& dir, const LoadOptions& options) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail("model directory '{}' does not exist", dir);
  ModelConfig config = load_model_config(dir);
  const c10::Device device = parse_device(options.device);
  // Default compute dtype: as stored on GPUs. On the CPU float32 activations (LibTorch 1.13's bf16
  // CPU operators are slow, docs/BENCHMARKS.md) with matrices kept as stored when bf16 ("mixed"):
  // decoding reads half the bytes. The decode kernels multiply them with AVX512-BF16 dot products,
  // which round the activations to bf16 (as a bf16 model computes) and accumulate in float32.
  std::string dtype_name = options.dtype;
  const bool automatic = dtype_name.empty() || dtype_name == "auto";
  if (automatic) dtype_name = device.is_cpu() ? "float32" : config.torch_dtype;
  const c10::ScalarType dtype = automatic && device.is_cpu() ? c10::ScalarType::Undefined : parse_dtype(dtype_name);
  ModelWeights weights = load_weights(config, dir, dtype);
  if (!device.is_cpu())
    for (auto& [name, t] : weights.named()) *t = t->to(device);
  if (weights.lm_head.defined() && config.tie_word_embeddings) weights.lm_head = weights.embed;
  return std::make_unique<Transformer>(std::move(config), std::move(weights), device);
}

at::Tensor Transformer::embed(const at::Tensor& tokens) const {
  at::Tensor x = torch::embedding(weights_.embed, tokens).to(dtype_);  // [N, H]
  if (config_.scale_embeddings) {
    // HF rounds the normaliser to the activation dtype before multiplying.
    at::Tensor scale = torch::tensor(std::sqrt(double(config_.hidden_size)), torch::kFloat32)
                           .to(x.scalar_type()).to(x.device());
    x = x * scale;
  }
  return x;
}

at::Tensor Transformer::logits_from_final_hidden(const at::Tensor& hidden, const at::Tensor& head_rows) const {
  at::Tensor logits = dense(hidden, head_rows.defined() ? head_rows : weights_.lm_head).to(torch::kFloat32);
  if (config_.final_softcap) logits = softcap(logits, *config_.final_softcap);
  return logits;
}

// Attention for every segment. q [N, nh, D], k/v [N, nkv, D] (RoPE applied; a KV-shared layer gets
// its source layer's, which cached segments read from the cache instead). Returns [N, nh*D].
at::Tensor Transformer::attention(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& v, std::vector<Segment>& segments) {
  const int64_t nkv = config_.kv_heads_at(layer), group = config_.num_heads / nkv, D = config_.head_dim_at(layer);
  const int64_t window = config_.layer_is_sliding[layer] ? config_.sliding_window : 0;
  const bool shared = config_.kv_shared(layer);  // k, v: the source layer's, already in the cache
  if (segments.size() > 1 && uniform_without_cache(segments)) {
    // Training / scoring: B equal sequences without a cache, all in one batched product.
    const int64_t B = int64_t(segments.size()), T = segments[0].length;
    at::Tensor qg = q.view({B, T, nkv, group, D}).permute({0, 2, 3, 1, 4}).reshape({B, nkv, group * T, D});
    at::Tensor keys = k.view({B, T, nkv, D}).permute({0, 2, 1, 3});    // [B, nkv, T, D]
    at::Tensor values = v.view({B, T, nkv, D}).permute({0, 2, 1, 3});  // [B, nkv, T, D]
    at::Tensor scores = torch::matmul(qg, keys.transpose(2, 3)) * config_.attn_scale;  // [B, nkv, g*T, T]
    if (config_.attn_softcap) scores = softcap(scores, *config_.attn_softcap);
    scores = scores.view({B, nkv, group, T, T});
    at::Tensor allowed = attention_mask(0, T, T, window, q.device());
    scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
    at::Tensor probs = torch::softmax(scores.to(torch::kFloat32), -1).to(q.scalar_type());
    at::Tensor out = torch::matmul(probs.view({B, nkv, group * T, T}), values);  // [B, nkv, g*T, D]
    return out.view({B, nkv, group, T, D}).permute({0, 3, 1, 2, 4}).reshape({B * T, nkv * group * D});
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(segments.size());
  for (Segment& seg : segments) {
    const int64_t T = seg.length;
    at::Tensor q_s = q.narrow(0, seg.row_begin, T);  // [T, nh, D]
    at::Tensor keys, values;                          // [nkv, S, D]
    if (seg.cache) {
      if (!shared) seg.cache->write(layer, k.narrow(0, seg.row_begin, T), v.narrow(0, seg.row_begin, T));
      keys = seg.cache->keys(layer, T);
      values = seg.cache->values(layer, T);
    } else {
      keys = k.narrow(0, seg.row_begin, T).transpose(0, 1);
      values = v.narrow(0, seg.row_begin, T).transpose(0, 1);
    }
    const int64_t S = keys.size(1);
    if (seg.cache && (T <= kFastAttentionMaxTokens || row_invariant_active()) && cpu_fast_paths_enabled() && q_s.scalar_type() == torch::kFloat32 &&
        q_s.device().is_cpu() && keys.scalar_type() == torch::kFloat32 && keys.stride(2) == 1 &&
        keys.stride(1) == D && values.strides() == keys.strides() && !(at::GradMode::is_enabled() && q_s.requires_grad())) {
      // Decoding: one fused pass over the cache (kernels/attention) instead of ~20 operators.
      const at::Tensor qc = q_s.contiguous();  // [T, nh, D]
      at::Tensor out = torch::empty({T, config_.num_heads * D}, q.options());
      kernels::AttentionShape shape;
      shape.tokens = T;
      shape.heads = config_.num_heads;
      shape.kv_heads = nkv;
      shape.head_dim = D;
      shape.keys = S;
      shape.position0 = seg.position0;
      shape.window = window;
      shape.scale = float(config_.attn_scale);
      shape.softcap = config_.attn_softcap ? float(*config_.attn_softcap) : 0.0f;
      kernels::attention_f32(shape, qc.data_ptr<float>(), keys.data_ptr<float>(), values.data_ptr<float>(),
                             keys.stride(0), out.data_ptr<float>());
      outputs.push_back(out);
      continue;
    }
    // GQA without copying K/V: queries grouped per kv head, [nkv, group*T, D].
    at::Tensor qg = q_s.view({T, nkv, group, D}).permute({1, 2, 0, 3}).reshape({nkv, group * T, D});
    at::Tensor scores = torch::matmul(qg, keys.transpose(1, 2)) * config_.attn_scale;  // [nkv, g*T, S]
    if (config_.attn_softcap) scores = softcap(scores, *config_.attn_softcap);
    scores = scores.view({nkv, group, T, S});
    if (T > 1 || window > 0) {
      at::Tensor allowed = attention_mask(seg.position0, T, S, window, q.device());
      scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
    }
    at::Tensor probs = torch::softmax(scores.to(torch::kFloat32), -1).to(q.scalar_type());
    at::Tensor out = torch::matmul(probs.view({nkv, group * T, S}), values);  // [nkv, g*T, D]
    outputs.push_back(out.view({nkv, group, T, D}).permute({2, 0, 1, 3}).reshape({T, nkv * group * D}));
  }
  return outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 0);
}

// Gemma4's per-layer inputs for tokens [N] with embeddings x [N, H]: [N, L, P].
at::Tensor Transformer::per_layer_inputs(const at::Tensor& tokens, const at::Tensor& x) const {
  const ModelConfig& c = config_;
  const int64_t N = x.size(0), L = c.num_layers, P = c.per_layer_size;
  // Token identity: the packed table [Vp, L*P] times sqrt(P) (rounded to the dtype, as HF does).
  at::Tensor identity = torch::embedding(weights_.embed_per_layer, tokens).to(dtype_);
  identity = identity * torch::tensor(std::sqrt(double(P)), torch::kFloat32).to(dtype_).to(device_);
  // Context: the embeddings projected [N, L*P], / sqrt(H), normed per layer over P.
  at::Tensor context = dense(x, weights_.per_layer_model_proj) * (1.0 / std::sqrt(double(c.hidden_size)));
  context = norm(c, context.view({N, L, P}), weights_.per_layer_proj_norm);
  return (context + identity.view({N, L, P})) * std::pow(2.0, -0.5);
}

at::Tensor Transformer::run_layers(const at::Tensor& tokens, at::Tensor x, const at::Tensor& positions,
                                   std::vector<Segment>& segments, const HiddenTaps& taps,
                                   std::vector<at::Tensor>* tapped) {
  const ModelConfig& c = config_;
  const int64_t N = x.size(0);
  auto [cos_g, sin_g] = rope_tables(inv_freq_global_, positions);
  at::Tensor cos_l, sin_l;
  if (c.sliding_window > 0) std::tie(cos_l, sin_l) = rope_tables(inv_freq_local_, positions);
  const at::Tensor ple = c.per_layer_size > 0 ? per_layer_inputs(tokens, x) : at::Tensor();  // [N, L, P]
  // Keys/values of the layers that KV-shared layers read (Gemma4), for segments without a cache.
  std::vector<at::Tensor> kept_k(size_t(c.num_layers)), kept_v(size_t(c.num_layers));

  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    const int64_t D = c.head_dim_at(l), nkv = c.kv_heads_at(l);
    const bool local = c.layer_is_sliding[l];
    const at::Tensor& cos = local ? cos_l : cos_g;
    const at::Tensor& sin = local ? sin_l : sin_g;
    at::Tensor h = norm(c, x, w.input_norm);
    at::Tensor q = dense(h, w.q_proj, w.q_bias).view({N, c.num_heads, D});
    if (c.qk_norm) q = norm(c, q, w.q_norm);
    q = apply_rope(q, cos, sin);
    at::Tensor k, v;
    if (c.kv_shared(l)) {
      k = kept_k[size_t(c.kv_source(l))];
      v = kept_v[size_t(c.kv_source(l))];
    } else {
      k = dense(h, w.k_proj, w.k_bias).view({N, nkv, D});
      // attention_k_eq_v: the values are the key projection before k_norm and RoPE.
      v = c.values_from_keys(l) ? k : dense(h, w.v_proj, w.v_bias).view({N, nkv, D});
      if (c.qk_norm) k = norm(c, k, w.k_norm);
      k = apply_rope(k, cos, sin);
      if (c.v_norm) v = rms_norm_f32_scale(v, at::Tensor(), c.rms_norm_eps);
      if (kv_read_by_later_layers_[size_t(l)]) {
        kept_k[size_t(l)] = k;
        kept_v[size_t(l)] = v;
      }
    }
    at::Tensor attn = dense(attention(l, q, k, v, segments), w.o_proj, w.o_bias);
    if (c.sandwich_norm) {
      x = x + norm(c, attn, w.post_attn_norm);
      h = norm(c, x, w.pre_ffn_norm);
    } else {
      x = x + attn;
      h = norm(c, x, w.post_attn_norm);
    }
    at::Tensor mlp = dense(activation(dense(h, w.gate_proj), c.activation) * dense(h, w.up_proj), w.down_proj);
    if (c.sandwich_norm) mlp = norm(c, mlp, w.post_ffn_norm);
    x = x + mlp;
    if (ple.defined()) {
      // Gemma4: the layer's per-layer input [N, P], gated by the hidden state, back to [N, H].
      at::Tensor gated = activation(dense(x, w.per_layer_gate), c.activation) * ple.select(1, l);
      x = x + norm(c, dense(gated, w.per_layer_proj), w.post_per_layer_norm);
    }
    if (w.layer_scalar.defined()) x = x * w.layer_scalar.to(x.scalar_type());
    if (tapped)
      for (size_t i = 0; i < taps.layers.size(); ++i)
        if (taps.layers[i] == l) (*tapped)[i] = x;
  }
  return norm(c, x, weights_.final_norm);
}

namespace {
// The tapped layers' outputs [N, H] each -> [N, n_taps, H]. On the CPU by row copies into one
// allocation: torch::stack is an unsqueeze per input plus a cat, whose dispatch overhead is a few
// percent of a decoding step of a small target, paid at every step even where auto mode does not
// draft.
at::Tensor stack_taps(const std::vector<at::Tensor>& tapped) {
  const at::Tensor& first = tapped[0];
  bool fast = first.device().is_cpu() && first.dim() == 2;
  for (const at::Tensor& t : tapped)
    fast = fast && t.is_contiguous() && t.sizes() == first.sizes() && t.scalar_type() == first.scalar_type();
  if (!fast) return torch::stack(tapped, 1);
  const int64_t N = first.size(0), H = first.size(1), n = int64_t(tapped.size());
  at::Tensor out = at::empty({N, n, H}, first.options());
  const size_t row_bytes = size_t(H) * first.element_size();
  auto* dst = static_cast<char*>(out.data_ptr());
  for (int64_t r = 0; r < N; ++r)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + size_t(r * n + i) * row_bytes, static_cast<const char*>(tapped[size_t(i)].data_ptr()) + size_t(r) * row_bytes,
                  row_bytes);
  return out;
}
}  // namespace

std::vector<ChunkOutput> Transformer::forward(std::vector<SequenceChunk>& chunks, const HiddenTaps& taps) {
  torch::NoGradGuard no_grad;
  RowInvariantScope row_invariant;  // batch-independent results per sequence (model/ops.h)
  const ModelConfig& c = config_;
  for (int64_t layer : taps.layers)
    if (layer < 0 || layer >= c.num_layers)
      fail("hidden tap layer {} is out of range (model has {} layers)", layer, c.num_layers);

  std::vector<Segment> segments(chunks.size());
  std::vector<int64_t> all_tokens, all_positions;
  for (size_t i = 0; i < chunks.size(); ++i) {
    SequenceChunk& chunk = chunks[i];
    const int64_t T = int64_t(chunk.tokens.size());
    if (T == 0) fail("forward: chunk {} has no tokens", i);
    const int64_t position0 = chunk.cache ? chunk.cache->length() : 0;
    if (position0 + T > c.max_position_embeddings)
      fail("sequence of {} tokens exceeds the model's context of {} tokens", position0 + T,
           c.max_position_embeddings);
    segments[i] = Segment{int64_t(all_tokens.size()), T, position0, chunk.cache};
    for (int64_t t = 0; t < T; ++t) {
      const int64_t token = chunk.tokens[t];
      if (token < 0 || token >= c.vocab_size)
        fail("token id {} is outside the vocabulary [0, {})", token, c.vocab_size);
      all_tokens.push_back(token);
      all_positions.push_back(position0 + t);
    }
    if (chunk.cache) chunk.cache->reserve(T);
  }

  // The LM head only for the rows that want logits.
  std::vector<int64_t> logit_rows;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Segment& seg = segments[i];
    if (chunks[i].logits == LogitsAt::Last) logit_rows.push_back(seg.row_begin + seg.length - 1);
    if (chunks[i].logits == LogitsAt::All)
      for (int64_t t = 0; t < seg.length; ++t) logit_rows.push_back(seg.row_begin + t);
  }
  // One host -> device copy per forward (on a GPU each copy waits for the queue): tokens [N],
  // positions [N] and logit rows [R] travel as one int64 tensor [2N + R].
  const int64_t N = int64_t(all_tokens.size()), R = int64_t(logit_rows.size());
  std::vector<int64_t> host = std::move(all_tokens);
  host.insert(host.end(), all_positions.begin(), all_positions.end());
  host.insert(host.end(), logit_rows.begin(), logit_rows.end());
  const at::Tensor indices = torch::tensor(host, torch::TensorOptions().dtype(torch::kInt64)).to(device_);
  const at::Tensor tokens = indices.narrow(0, 0, N), positions = indices.narrow(0, N, N);
  std::vector<at::Tensor> tapped(taps.layers.size());
  at::Tensor final_hidden = run_layers(tokens, embed(tokens), positions, segments, taps, &tapped);
  for (SequenceChunk& chunk : chunks)
    if (chunk.cache) chunk.cache->commit(int64_t(chunk.tokens.size()));

  at::Tensor logits;
  if (R > 0) logits = logits_from_final_hidden(final_hidden.index_select(0, indices.narrow(0, 2 * N, R)));

  at::Tensor stacked_taps = taps.layers.empty() ? at::Tensor() : stack_taps(tapped);  // [N, n_taps, H]
  std::vector<ChunkOutput> outputs(chunks.size());
  int64_t logit_cursor = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Segment& seg = segments[i];
    const int64_t n = chunks[i].logits == LogitsAt::All ? seg.length : chunks[i].logits == LogitsAt::Last ? 1 : 0;
    if (n > 0) outputs[i].logits = logits.narrow(0, logit_cursor, n);
    logit_cursor += n;
    if (stacked_taps.defined()) outputs[i].layer_hidden = stacked_taps.narrow(0, seg.row_begin, seg.length);
    if (taps.final_hidden) outputs[i].final_hidden = final_hidden.narrow(0, seg.row_begin, seg.length);
  }
  return outputs;
}

ChunkOutput Transformer::forward(KVCache& cache, const std::vector<int64_t>& tokens, LogitsAt logits,
                                 const HiddenTaps& taps) {
  std::vector<SequenceChunk> chunks{SequenceChunk{&cache, tokens, logits}};
  return std::move(forward(chunks, taps)[0]);
}

at::Tensor Transformer::hidden_full(const at::Tensor& tokens, const HiddenTaps& taps,
                                   std::vector<at::Tensor>* layer_hidden) {
  const int64_t B = tokens.size(0), T = tokens.size(1);
  if (T > config_.max_position_embeddings)
    fail("sequence of {} tokens exceeds the model's context of {} tokens", T, config_.max_position_embeddings);
  std::vector<Segment> segments(B);
  for (int64_t b = 0; b < B; ++b) segments[b] = Segment{b * T, T, 0, nullptr};
  at::Tensor flat = tokens.reshape({B * T}).to(device_);
  at::Tensor positions = torch::arange(T, torch::TensorOptions().dtype(torch::kInt64).device(device_)).repeat({B});
  std::vector<at::Tensor> tapped(taps.layers.size());
  at::Tensor hidden = run_layers(flat, embed(flat), positions, segments, taps, &tapped);
  if (layer_hidden) {
    layer_hidden->clear();
    for (auto& t : tapped) layer_hidden->push_back(t.view({B, T, -1}));
  }
  return hidden.view({B, T, -1});
}

at::Tensor Transformer::forward_full(const at::Tensor& tokens, const HiddenTaps& taps,
                                     std::vector<at::Tensor>* layer_hidden, at::Tensor* final_hidden) {
  at::Tensor hidden = hidden_full(tokens, taps, layer_hidden);  // [B, T, H]
  if (final_hidden) *final_hidden = hidden;
  return logits_from_final_hidden(hidden);
}

}  // namespace dspark
