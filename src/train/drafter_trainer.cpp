#include "train/drafter_trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <limits>
#include <random>
#include <utility>

#include "drafter/draft_vocab.h"
#include "drafter/dspark_drafter.h"
#include "io/atomic_file.h"
#include "spec/dspark_source.h"
#include "spec/speculative.h"
#include "train/distributed.h"
#include "train/lr_schedule.h"
#include "train/regen.h"
#include "train/token_file.h"
#include "train/train_state.h"
#include "train/window_sampler.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace dspark {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One training batch, built from B samples.
struct Batch {
  at::Tensor features;       // [B, T, F]
  at::Tensor anchors;        // [B, A]
  at::Tensor anchor_tokens;  // [B, A]
  at::Tensor prev_tokens;    // [B, A, g]
  at::Tensor labels;         // [B, A, g] (draft ids with a draft vocabulary, -1 outside it)
  at::Tensor valid;          // [B, A, g] bool
  at::Tensor target_probs;   // [B, A, g, Vd]: p_t on the drafter's output vocabulary
  at::Tensor target_outside; // [B, A, g] p_t's mass outside a draft vocabulary (undefined without one)
  at::Tensor target_argmax;  // [B, A, g] with a draft vocabulary: argmax of the full p_t as a draft id (-1 outside)
  int64_t tokens = 0;        // real tokens in the batch
};

// Target hidden states of every training sample, computed once before the first step and kept
// in RAM as bf16 (the target is frozen, so every epoch would recompute the same rows). Per sample
// [len, m + 1, H]: the m tapped layers, then the final post-norm hidden.
struct HiddenCache {
  std::vector<at::Tensor> rows;  // indexed like the training samples
};

// Target forward over `tokens` [B, T]: tapped layers [B, T, m, H] (empty in `final` mode) and the
// final hidden [B, T, H].
void target_hidden(Transformer& target, const DSparkDrafter& drafter, const at::Tensor& tokens, at::Tensor& layers,
                   at::Tensor& final_hidden) {
  std::vector<at::Tensor> layer_hidden;
  final_hidden = target.hidden_full(tokens, drafter.taps(), &layer_hidden);
  layers = layer_hidden.empty() ? at::Tensor() : torch::stack(layer_hidden, 2);
}

at::Tensor padded_tokens(const std::vector<const RegenSample*>& samples, int64_t max_len) {
  int64_t T = 1;
  for (auto* s : samples) T = std::max<int64_t>(T, std::min<int64_t>(max_len, int64_t(s->tokens.size())));
  at::Tensor tokens = torch::zeros({int64_t(samples.size()), T}, torch::kInt64);
  auto tok = tokens.accessor<int64_t, 2>();
  for (size_t b = 0; b < samples.size(); ++b) {
    const std::vector<int64_t>& ids = samples[b]->tokens;
    for (int64_t t = 0; t < std::min<int64_t>(T, int64_t(ids.size())); ++t) tok[int64_t(b)][t] = ids[size_t(t)];
  }
  return tokens;
}

HiddenCache build_hidden_cache(Transformer& target, const DSparkDrafter& drafter, const std::vector<RegenSample>& samples,
                               int64_t batch_size, int64_t max_len, bool progress, const InterruptFlag& interrupted) {
  torch::NoGradGuard no_grad;
  HiddenCache cache;
  cache.rows.resize(samples.size());
  Progress bar("hidden cache", int64_t(samples.size()));
  for (size_t i = 0; i < samples.size(); i += size_t(batch_size)) {
    if (interrupted.raised()) fail("interrupted while caching the target's hidden states (nothing to save yet)");
    std::vector<const RegenSample*> chunk;
    for (size_t j = i; j < std::min(samples.size(), i + size_t(batch_size)); ++j) chunk.push_back(&samples[j]);
    at::Tensor layers, final_hidden;
    target_hidden(target, drafter, padded_tokens(chunk, max_len), layers, final_hidden);
    at::Tensor all = layers.defined() ? torch::cat({layers, final_hidden.unsqueeze(2)}, 2) : final_hidden.unsqueeze(2);
    for (size_t b = 0; b < chunk.size(); ++b) {
      const int64_t len = std::min<int64_t>(all.size(1), int64_t(chunk[b]->tokens.size()));
      // In host RAM whatever the device: [len, m+1, H] bf16.
      cache.rows[i + b] = all[int64_t(b)].narrow(0, 0, len).to(torch::kCPU, torch::kBFloat16).contiguous();
    }
    if (progress) bar.update(int64_t(std::min(samples.size(), i + size_t(batch_size))), "");
  }
  if (progress) bar.finish(fmt::format("{} samples", samples.size()));
  return cache;
}

// `cached`: the samples' rows in a HiddenCache (same order as `samples`), or empty: run the target.
// `rows`: the rows [first, second) of the batch to build (a data-parallel rank's share; {0, 0}:
// all). Anchors are drawn for every row, so a row's anchors do not depend on which rank builds it.
Batch make_batch(Transformer& target, const DSparkDrafter& drafter, const std::vector<const RegenSample*>& all_samples,
                 int64_t A, int64_t max_len, std::mt19937_64& rng, const std::vector<const at::Tensor*>& all_cached = {},
                 std::pair<int64_t, int64_t> rows = {0, 0}) {
  torch::NoGradGuard no_grad;
  const int64_t g = drafter.config().block_size;
  if (rows.second <= rows.first) rows = {0, int64_t(all_samples.size())};
  const std::vector<const RegenSample*> samples(all_samples.begin() + rows.first, all_samples.begin() + rows.second);
  const std::vector<const at::Tensor*> cached =
      all_cached.empty() ? all_cached
                         : std::vector<const at::Tensor*>(all_cached.begin() + rows.first, all_cached.begin() + rows.second);
  const int64_t B = int64_t(samples.size());
  at::Tensor tokens = padded_tokens(samples, max_len);  // [B, T]: the rows built here
  const int64_t T = tokens.size(1);
  Batch batch;
  std::vector<int64_t> anchors(size_t(B * A), 0), labels(size_t(B * A * g), 0), prev(size_t(B * A * g), 0);
  std::vector<uint8_t> valid(size_t(B * A * g), 0);
  std::vector<int64_t> candidates;
  for (int64_t row = 0; row < int64_t(all_samples.size()); ++row) {
    const auto& s = *all_samples[size_t(row)];
    const int64_t len = std::min<int64_t>(max_len, int64_t(s.tokens.size()));
    const bool here = row >= rows.first && row < rows.second;
    const int64_t b = row - rows.first;
    if (here) batch.tokens += len;
    // Anchors inside the response with at least one label after them: n_prompt <= a <= len - 2.
    const int64_t lo = s.n_prompt, hi = len - 2;
    candidates.clear();
    for (int64_t a = lo; a <= hi; ++a) candidates.push_back(a);
    for (int64_t j = 0; j < A; ++j) {
      if (candidates.empty()) break;  // this sequence's blocks stay invalid
      // Without replacement while candidates last (partial Fisher-Yates), then with.
      int64_t a;
      if (j < int64_t(candidates.size())) {
        const size_t pick = size_t(j) + size_t(rng() % uint64_t(candidates.size() - size_t(j)));
        std::swap(candidates[size_t(j)], candidates[pick]);
        a = candidates[size_t(j)];
      } else {
        a = candidates[size_t(rng() % candidates.size())];
      }
      if (!here) continue;  // another rank's row: its draws only advance the generator
      anchors[size_t(b * A + j)] = a;
      for (int64_t k = 0; k < g; ++k) {
        const size_t at = size_t((b * A + j) * g + k);
        const int64_t pos = a + 1 + k;
        const bool ok = pos < len;
        valid[at] = ok;
        labels[at] = ok ? s.tokens[size_t(pos)] : 0;
        prev[at] = k == 0 ? s.tokens[size_t(a)] : labels[at - 1];
      }
    }
  }
  at::Tensor layers, final_hidden;  // [B, T, m, H], [B, T, H]
  if (cached.empty()) {
    target_hidden(target, drafter, tokens, layers, final_hidden);
  } else {
    const at::Tensor& first = *cached[0];
    at::Tensor all = torch::zeros({B, T, first.size(1), first.size(2)}, first.options());  // [B, T, m+1, H] bf16
    for (int64_t b = 0; b < B; ++b) all[b].narrow(0, 0, cached[size_t(b)]->size(0)).copy_(*cached[size_t(b)]);
    all = all.to(target.device(), torch::kFloat32);
    const int64_t m = all.size(2) - 1;
    if (m > 0) layers = all.narrow(2, 0, m);
    final_hidden = all.select(2, m);
  }
  batch.features = drafter.config().context == ContextMode::Layers ? drafter.features_from(layers)  // [B, T, m*H]
                                                                   : drafter.features_from(final_hidden);
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  batch.anchors = torch::tensor(anchors, i64).view({B, A});
  batch.labels = torch::tensor(labels, i64).view({B, A, g});
  batch.prev_tokens = torch::tensor(prev, i64).view({B, A, g});
  batch.valid = torch::tensor(std::vector<int64_t>(valid.begin(), valid.end()), i64).view({B, A, g}).to(torch::kBool);
  batch.anchor_tokens = tokens.gather(1, batch.anchors);
  // p_t for slot k (predicting token a+k+1) is the target's distribution at position a+k.
  at::Tensor positions = (batch.anchors.unsqueeze(-1) + torch::arange(g, i64)).clamp_max(T - 1).view({B, A * g});
  // The index tensors were built on the host; the model and its hidden states live on the device.
  const c10::Device dev = target.device();
  for (at::Tensor* t : {&batch.anchors, &batch.labels, &batch.prev_tokens, &batch.valid, &batch.anchor_tokens, &positions})
    *t = t->to(dev);
  at::Tensor h = final_hidden.gather(1, positions.unsqueeze(-1).expand({B, A * g, final_hidden.size(-1)}));
  batch.target_probs = torch::softmax(target.logits_from_final_hidden(h.to(target.dtype())), -1).view({B, A, g, -1});
  if (drafter.d2t().defined()) {
    // The drafter predicts only its draft vocabulary: p_t on those columns, the rest as one mass.
    const at::Tensor& d2t = drafter.d2t();
    const at::Tensor to_draft = target_to_draft(d2t.to(batch.labels.device()), target.config().vocab_size);  // [V]
    // For --ce-label target-argmax: the argmax over the whole vocabulary, which may lie outside.
    batch.target_argmax = to_draft.index({batch.target_probs.argmax(-1)});              // [B, A, g]
    batch.target_probs = batch.target_probs.index_select(-1, d2t);                   // [B, A, g, Vd]
    batch.target_outside = (1.0 - batch.target_probs.sum(-1)).clamp_min(0.0);        // [B, A, g]
    batch.labels = to_draft.index({batch.labels});
  }
  return batch;
}

std::vector<double> mean_of(std::vector<double> sums, int64_t count) {
  for (double& v : sums) v /= double(std::max<int64_t>(1, count));
  return sums;
}

// The loss of one batch. With a draft vocabulary, CE on the target's argmax takes the argmax over
// the whole vocabulary (make_batch), not over the draft columns: an argmax outside adds 0 to CE.
DSparkLoss batch_loss(const at::Tensor& logits, const at::Tensor& conf_logits, const Batch& batch, DSparkLossWeights w) {
  at::Tensor labels = batch.labels;
  if (w.ce_on_target_argmax && batch.target_argmax.defined()) {
    labels = batch.target_argmax;
    w.ce_on_target_argmax = false;
  }
  return dspark_loss(logits, conf_logits, batch.target_probs, labels, batch.valid, w, batch.target_outside);
}

json loss_identity(const DSparkLossWeights& w) {
  json loss = {w.ce, w.l1, w.bce, w.decay};
  if (w.ce_on_target_argmax) loss.push_back("ce_on_target_argmax");  // absent: runs from before the option resume
  return loss;
}

json identity_of(const DrafterTrainOptions& o, const TargetIdentity& target, int64_t n_samples, const at::Tensor& d2t) {
  json id = {{"config", to_json(o.config)}, {"target", to_json(target)}, {"samples", n_samples},
             {"batch_size", o.batch_size}, {"anchors", o.anchors}, {"max_len", o.max_len}, {"lr", o.lr},
             {"min_lr_ratio", o.min_lr_ratio}, {"weight_decay", o.weight_decay}, {"grad_clip", o.grad_clip},
             {"seed", o.seed}, {"loss", loss_identity(o.loss)}, {"eval_samples", o.eval_samples}};
  if (o.cache_hidden) id["cache_hidden"] = true;  // bf16-rounded features: part of what resumes exactly
  if (d2t.defined()) {
    // Other data of the same size can choose other ids: a resumed run must choose the same ones.
    const at::Tensor ids = d2t.to(torch::kCPU).contiguous();
    id["d2t_fnv1a64"] =
        std::to_string(fnv1a64(std::string(reinterpret_cast<const char*>(ids.data_ptr<int64_t>()), size_t(ids.numel()) * 8)));
  }
  return id;
}

}  // namespace

DrafterEval evaluate_drafter(Transformer& target, DSparkDrafter& drafter, const std::vector<RegenSample>& eval,
                             const DrafterTrainOptions& o) {
  torch::NoGradGuard no_grad;
  DrafterEval r;
  if (eval.empty()) return r;
  const int64_t g = drafter.config().block_size;
  std::mt19937_64 rng(12345);
  double tau_sum = 0;
  int64_t blocks = 0;
  at::Tensor survival_sum = torch::zeros({g});
  for (size_t i = 0; i < eval.size(); i += size_t(o.batch_size)) {
    std::vector<const RegenSample*> chunk;
    for (size_t j = i; j < std::min(eval.size(), i + size_t(o.batch_size)); ++j) chunk.push_back(&eval[j]);
    Batch batch = make_batch(target, drafter, chunk, o.anchors, o.max_len, rng);
    auto out = drafter.forward_train(target, batch.features, batch.anchors, batch.anchor_tokens, batch.prev_tokens);
    DSparkLoss loss = batch_loss(out.logits, out.conf_logits, batch, o.loss);
    at::Tensor any = batch.valid.select(-1, 0).reshape({-1});
    at::Tensor surv = torch::cumprod((1.0 - loss.tv) * batch.valid.to(torch::kFloat32), -1).reshape({-1, g}).index({any});
    tau_sum += surv.sum().item<double>() + double(surv.size(0));
    blocks += surv.size(0);
    survival_sum += surv.sum(0).to(torch::kCPU);
  }
  if (blocks > 0) {
    r.tau_probabilistic = tau_sum / double(blocks);
    for (int64_t k = 0; k < g; ++k) r.accept_rate.push_back(survival_sum[k].item<double>() / double(blocks));
  }
  // Live greedy speculative decoding on the held-out prompts.
  auto shared = std::shared_ptr<DSparkDrafter>(&drafter, [](DSparkDrafter*) {});
  DSparkSource source(shared, target);
  SpecOptions spec;
  spec.max_new_tokens = o.live_eval_tokens;
  spec.eos_ids = o.eos_ids;
  SpecStats stats;
  for (size_t i = 0; i < eval.size() && int64_t(i) < o.live_eval_prompts; ++i) {
    std::vector<int64_t> prompt(eval[i].tokens.begin(), eval[i].tokens.begin() + eval[i].n_prompt);
    stats.add(generate_speculative(target, &source, prompt, spec).stats);
  }
  r.live_tau = stats.tau();
  r.live_acceptance = stats.acceptance_per_position();
  return r;
}

DrafterTrainResult train_drafter(Transformer& target, const DrafterTrainOptions& o) {
  if (o.batch_size < 1 || o.anchors < 1 || o.max_len < 2) fail("--batch-size, --anchors must be >= 1, --max-len >= 2");
  const auto run_start = Clock::now();
  DataParallel dp(o.dist);
  const std::pair<int64_t, int64_t> my_rows = dp.shard(o.batch_size);
  const bool show = o.progress && dp.main();
  const fs::path out(o.out_dir), train_dir = out / "train";
  fs::create_directories(train_dir);
  const std::string state_path = (train_dir / "train_state.safetensors").string();
  const bool have_state = fs::exists(state_path);
  if (have_state && !o.resume)
    fail("{} already holds a training run; pass --resume to continue it or choose another --out", o.out_dir);

  const TargetIdentity target_id = TargetIdentity::of(target);
  // The data must come from this target.
  if (o.data_dirs.empty()) fail("no regenerated data directory given");
  std::vector<RegenSample> samples;
  for (const std::string& dir : o.data_dirs) {
    const std::string regen_meta = (fs::path(dir) / "regen.json").string();
    if (fs::exists(regen_meta)) {
      json m = json::parse(io::read_text_file(regen_meta), nullptr, false);
      if (!m.is_discarded() && m.contains("target") && target_identity_from_json(m["target"], regen_meta) != target_id)
        fail("{} was regenerated by another target", dir);
    }
    std::vector<RegenSample> part = read_regen_samples(dir);
    samples.insert(samples.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  const int64_t n_eval = held_out_samples(int64_t(samples.size()), o.eval_samples);
  std::vector<RegenSample> eval(samples.end() - n_eval, samples.end());
  samples.resize(samples.size() - size_t(n_eval));

  // A draft vocabulary: the most frequent tokens of the training responses (every rank reads the
  // same samples, so every rank chooses the same ids; a resumed run chooses them again).
  // The counts also go beside the drafter (token_counts.json), so that it can be cut at load.
  const std::vector<int64_t> label_counts = label_token_counts(samples, target_id.vocab_size, o.max_len);
  at::Tensor d2t;
  if (o.config.draft_vocab_size > 0) {
    if (o.config.draft_vocab_size >= target_id.vocab_size)
      fail("--draft-vocab {} must be below the target's vocabulary of {}", o.config.draft_vocab_size, target_id.vocab_size);
    d2t = most_frequent_tokens(label_counts, o.config.draft_vocab_size);
  }
  DSparkDrafter drafter(o.config, target, o.seed, d2t);
  drafter.to(target.device());  // before its parameters are handed to the optimizer
  NamedParameters params = drafter.named_parameters();
  std::vector<at::Tensor> all;
  for (auto& [name, t] : params) {
    t.requires_grad_(true);
    all.push_back(t);
  }
  torch::optim::AdamW optimizer(all, torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(o.weight_decay));
  json identity = identity_of(o, target_id, int64_t(samples.size()), d2t);
  if (!o.init_dir.empty()) {
    const std::unique_ptr<DSparkDrafter> init = DSparkDrafter::load(o.init_dir, target);
    if (to_json(init->config()) != to_json(o.config))
      fail("--init {}: its config differs from this run's (leave out --config and the options that change it)",
           o.init_dir);
    if (d2t.defined() && !at::equal(init->d2t().to(torch::kCPU), d2t.to(torch::kCPU)))
      fail("--init {}: its draft vocabulary differs from the one this data chooses", o.init_dir);
    identity["init"] = init->fingerprint();
    if (!have_state) {  // a resumed run restores its own parameters below
      const NamedParameters from = init->named_parameters();
      if (from.size() != params.size()) fail("--init {}: {} parameters, expected {}", o.init_dir, from.size(), params.size());
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) {
        if (from[i].first != params[i].first) fail("--init {}: parameter {} where {} was expected", o.init_dir, from[i].first, params[i].first);
        params[i].second.copy_(from[i].second.to(params[i].second.device()));
      }
    }
  }
  int64_t step = 0, total_steps = o.steps, saved_warmup = -1;
  if (have_state) {
    json state = load_train_state(state_path, params, optimizer);
    if (state.value("identity", json()) != identity)
      fail("{} was made with other options, data or target; resume with the original options", state_path);
    step = state.at("step").get<int64_t>();
    total_steps = state.at("total_steps").get<int64_t>();
    saved_warmup = state.value("warmup", int64_t(-1));
    if (o.steps > 0 && o.steps != total_steps) fail("--steps {} differs from the resumed run's {}", o.steps, total_steps);
  }
  // --minutes without --steps is a time budget: the first steps measure the speed and fix the
  // schedule length (then saved, so a resumed run keeps it). Evaluations are not in the estimate.
  const bool budget = total_steps <= 0 && o.minutes > 0;
  if (total_steps <= 0 && !budget) fail("give --steps N or --minutes M");
  // The probe skips the first steps: they pay one-off allocation and page-fault costs, and timing
  // them made 50-minute budgets end after about 40.
  constexpr int64_t kProbeSkipSteps = 2, kSpeedProbeSteps = 12;
  if (budget) total_steps = std::numeric_limits<int32_t>::max();
  int64_t warmup = o.warmup_steps >= 0 ? o.warmup_steps : budget ? 20 : std::max<int64_t>(1, total_steps * 4 / 100);
  if (have_state) warmup = saved_warmup >= 0 ? saved_warmup : warmup;
  int64_t eval_every = o.eval_every > 0 ? o.eval_every : std::max<int64_t>(1, total_steps / 5);

  ShuffledOrder order(int64_t(samples.size()), o.seed);
  std::ofstream log;
  if (dp.main()) log.open((train_dir / "log.jsonl").string(), std::ios::app);
  auto checkpoint = [&] {
    if (budget && step < kSpeedProbeSteps) return;  // schedule length not known yet: nothing to resume
    if (!dp.main()) return;
    save_train_state(state_path, params, optimizer,
                     {{"step", step}, {"total_steps", total_steps}, {"warmup", warmup}, {"identity", identity}});
    drafter.save(o.out_dir, torch::kBFloat16);
    write_token_counts((out / kTokenCountsFile).string(), label_counts);
  };
  InterruptFlag interrupted;
  // Before the speed probe, so a time budget's schedule is measured on cached steps.
  const HiddenCache cache = o.cache_hidden ? build_hidden_cache(target, drafter, samples, o.batch_size, o.max_len,
                                                                show, interrupted)
                                           : HiddenCache{};
  Progress progress("train", total_steps);
  progress.set_start(step);
  DrafterTrainResult result;
  auto last_checkpoint = Clock::now();
  const auto loop_start = Clock::now();
  auto probe_start = loop_start;
  int64_t tokens_this_run = 0;
  double loss_sum = 0, tau_sum = 0;
  std::vector<double> accept_sum;  // teacher-forced acceptance per position since the last log line
  int64_t count = 0;
  // Whether to stop before step `s`. With several ranks every rank must stop at the same step: the
  // decision for the next step travels with each step's gradients.
  auto want_stop = [&](int64_t s) {
    return interrupted.raised() || (o.stop_at > 0 && s >= o.stop_at) ||
           (!budget && o.minutes > 0 && seconds_since(run_start) > o.minutes * 60);
  };
  bool stop_agreed = o.stop_at > 0 && step >= o.stop_at;
  const at::Tensor loss_position_weights = position_weights(o.config.block_size, o.loss.decay).to(target.device());
  while (step < total_steps) {
    if (dp.distributed() ? stop_agreed : want_stop(step)) break;
    dp.fault_point(step);
    const double lr = warmup_cosine_lr(step, total_steps, warmup, o.lr, o.min_lr_ratio);
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    std::vector<const RegenSample*> chunk;
    std::vector<const at::Tensor*> cached;
    for (int64_t b = 0; b < o.batch_size; ++b) {
      const size_t i = size_t(order.at(step * o.batch_size + b));
      chunk.push_back(&samples[i]);
      if (o.cache_hidden) cached.push_back(&cache.rows[i]);
    }
    std::mt19937_64 rng(o.seed * 7919 + uint64_t(step));  // anchors of step s: a function of (seed, s)
    Batch batch = make_batch(target, drafter, chunk, o.anchors, o.max_len, rng, cached, my_rows);
    optimizer.zero_grad();
    auto fwd = drafter.forward_train(target, batch.features, batch.anchors, batch.anchor_tokens, batch.prev_tokens);
    DSparkLoss loss = batch_loss(fwd.logits, fwd.conf_logits, batch, o.loss);
    double loss_value = loss.total.item<double>();
    if (!std::isfinite(loss_value)) fail("loss became {} at step {}; lower --lr", loss_value, step);
    loss.total.backward();
    double tau = tau_probabilistic(loss.tv, batch.valid);
    std::vector<double> accept = accept_rate_per_position(loss.tv, batch.valid);
    int64_t step_tokens = batch.tokens;
    if (dp.distributed()) {
      // The loss is a weighted mean over this rank's valid positions, with normalizer n_r (the sum
      // of their position weights). One process on the whole batch divides by N = sum_r n_r, so
      // its gradient is sum_r n_r * grad_r / N: scale, sum over ranks, divide.
      const double n_r = (loss_position_weights * batch.valid.to(torch::kFloat32)).sum().item<double>();
      for (auto& p : all)
        if (p.grad().defined()) p.grad().mul_(n_r);
      std::vector<double> values = {n_r, loss_value * n_r, tau, double(batch.tokens), want_stop(step + 1) ? 1.0 : 0.0};
      values.insert(values.end(), accept.begin(), accept.end());
      const std::vector<double> sum = dp.sum_gradients(all, values);
      const double N = sum[0], W = dp.world_size();
      for (auto& p : all)
        if (p.grad().defined()) p.grad().div_(std::max(N, 1e-8));
      // Logged metrics: the loss over the whole batch; tau and acceptance as means of the ranks'.
      loss_value = sum[1] / std::max(N, 1e-8);
      tau = sum[2] / W;
      step_tokens = int64_t(std::llround(sum[3]));
      stop_agreed = sum[4] > 0;
      for (size_t k = 0; k < accept.size(); ++k) accept[k] = sum[5 + k] / W;
    }
    torch::nn::utils::clip_grad_norm_(all, o.grad_clip);
    optimizer.step();
    ++step;
    if (budget && step == kProbeSkipSteps) probe_start = Clock::now();
    if (budget && step == kSpeedProbeSteps) {
      const double per_step = seconds_since(probe_start) / double(kSpeedProbeSteps - kProbeSkipSteps);
      total_steps = std::max<int64_t>(step + 1, int64_t((o.minutes * 60 - seconds_since(run_start)) / per_step) + step);
      total_steps = dp.broadcast_value(total_steps);  // rank 0's measurement sets every rank's schedule
      if (o.eval_every <= 0) eval_every = std::max<int64_t>(1, total_steps / 5);
      progress = Progress("train", total_steps);
    }
    tokens_this_run += step_tokens;
    loss_sum += loss_value;
    tau_sum += tau;
    if (accept_sum.empty()) accept_sum.assign(accept.size(), 0.0);
    for (size_t k = 0; k < accept.size(); ++k) accept_sum[k] += accept[k];
    ++count;
    std::string accept_text, sep;
    for (double a : accept_sum) accept_text += fmt::format("{}{:.2f}", std::exchange(sep, " "), a / double(count));
    const std::string metrics = fmt::format("loss {:.4f} | tau_p {:.2f} | acc@k {} | {:.0f} tok/s", loss_sum / count,
                                            tau_sum / count, accept_text, tokens_this_run / seconds_since(loop_start));
    if (show) progress.update(step, metrics);
    if (step % 10 == 0 || step == total_steps) {
      if (dp.main()) {  // with several ranks ce / l1 / bce are rank 0's share
        log << json{{"step", step}, {"loss", loss_sum / count}, {"tau_probabilistic", tau_sum / count}, {"accept_rate", mean_of(accept_sum, count)}, {"lr", lr},
                    {"ce", loss.ce.item<double>()}, {"l1", loss.l1.item<double>()}, {"bce", loss.bce.item<double>()}}
                   .dump()
            << "\n";
        log.flush();
      }
      result.train_loss = loss_sum / count;
      loss_sum = tau_sum = 0;
      std::fill(accept_sum.begin(), accept_sum.end(), 0.0);
      count = 0;
    }
    // Every rank evaluates (the same numbers), so none waits at the next step's collective for
    // longer than the timeout while rank 0 decodes.
    if ((step % eval_every == 0 && !(budget && step < kSpeedProbeSteps)) || step == total_steps) {
      result.eval = evaluate_drafter(target, drafter, eval, o);
      if (dp.main()) {
        log << json{{"step", step}, {"eval_tau_probabilistic", result.eval.tau_probabilistic},
                    {"eval_accept_rate", result.eval.accept_rate}, {"live_tau", result.eval.live_tau},
                    {"live_acceptance", result.eval.live_acceptance}}
                   .dump()
            << "\n";
        log.flush();
      }
      if (show) {
        progress.update(step, metrics, true);
        std::cerr << fmt::format("\nstep {}: held-out tau_probabilistic {:.3f}, live greedy tau {:.3f}\n", step,
                                 result.eval.tau_probabilistic, result.eval.live_tau);
      }
    }
    if (seconds_since(last_checkpoint) > o.checkpoint_minutes * 60) {
      checkpoint();
      last_checkpoint = Clock::now();
    }
  }
  if (count > 0) result.train_loss = loss_sum / count;
  checkpoint();
  if (show) {
    progress.finish(fmt::format("loss {:.4f}", result.train_loss));
    std::cerr << fmt::format("{} at step {}/{}; drafter in {}\n",
                             step >= total_steps ? "finished" : "stopped (resume with --resume)", step, total_steps,
                             o.out_dir);
  }
  result.step = step;
  result.total_steps = total_steps;
  result.finished = step >= total_steps;
  result.seconds = seconds_since(run_start);
  return result;
}

int64_t held_out_samples(int64_t n, int64_t eval_samples) { return std::min<int64_t>(eval_samples, n / 5); }

std::vector<int64_t> label_token_counts(const std::vector<RegenSample>& samples, int64_t vocab, int64_t max_len) {
  std::vector<int64_t> counts(static_cast<size_t>(vocab), 0);
  for (const auto& s : samples) {
    const int64_t len = std::min<int64_t>(max_len, int64_t(s.tokens.size()));
    for (int64_t t = s.n_prompt + 1; t < len; ++t) {
      const int64_t id = s.tokens[size_t(t)];
      if (id >= 0 && id < vocab) ++counts[size_t(id)];
    }
  }
  return counts;
}

}  // namespace dspark
