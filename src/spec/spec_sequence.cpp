#include "spec/spec_sequence.h"

#include <torch/torch.h>

#include <algorithm>

#include "util/error.h"

namespace dspark {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The prompt chunks' outputs as one prefill output: hidden taps concatenated over positions
// ([P, n_taps, H], [P, H]), the logits of the last chunk.
ChunkOutput concat_prefill(std::vector<ChunkOutput>& parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  ChunkOutput out;
  out.logits = parts.back().logits;
  std::vector<at::Tensor> layer, final;
  for (auto& p : parts) {
    if (p.layer_hidden.defined()) layer.push_back(p.layer_hidden);
    if (p.final_hidden.defined()) final.push_back(p.final_hidden);
  }
  if (!layer.empty()) out.layer_hidden = torch::cat(layer, 0);
  if (!final.empty()) out.final_hidden = torch::cat(final, 0);
  return out;
}
}  // namespace

SpecSequence::SpecSequence(Transformer& target, Drafter* drafter, std::vector<int64_t> prompt, SpecOptions options,
                           std::function<void(int64_t)> on_token)
    : target_(target), drafter_(drafter), prompt_(std::move(prompt)), options_(std::move(options)),
      on_token_(std::move(on_token)), rng_(options_.sampling.seed), cache_(target.new_cache()), start_(Clock::now()) {
  validate(options_.sampling);
  if (prompt_.empty()) fail("empty prompt");
  if (int64_t(prompt_.size()) >= context())
    fail("prompt of {} tokens fills the model's context of {}", prompt_.size(), context());
  gamma_ = options_.gamma > 0 ? options_.gamma : (drafter_ && drafter_->max_block() > 0 ? drafter_->max_block() : 5);
  if (drafter_ && drafter_->max_block() > 0 && gamma_ > drafter_->max_block())
    fail("--gamma {} exceeds the drafter's block size {}", gamma_, drafter_->max_block());
  if (drafter_) {
    taps_ = drafter_->taps();
    result_.stats.accepted_at.assign(size_t(gamma_), 0);
    result_.stats.drafted_at.assign(size_t(gamma_), 0);
  }
}

int64_t SpecSequence::context() const { return target_.config().max_position_embeddings; }

SequenceChunk SpecSequence::prefill_chunk(int64_t max_tokens) {
  if (phase_ != Phase::Prefill) fail("internal: prefill_chunk outside the prefill phase");
  const int64_t left = int64_t(prompt_.size()) - prefilled_;
  const int64_t n = max_tokens > 0 ? std::min(left, max_tokens) : left;
  SequenceChunk chunk;
  chunk.cache = &cache_;
  chunk.tokens.assign(prompt_.begin() + prefilled_, prompt_.begin() + prefilled_ + n);
  chunk.logits = prefilled_ + n == int64_t(prompt_.size()) ? LogitsAt::Last : LogitsAt::None;
  return chunk;
}

void SpecSequence::finish_prefill_chunk(const ChunkOutput& out, double forward_seconds) {
  prefilled_ = cache_.length();
  if (drafter_) prefill_outputs_.push_back(out);
  if (prefilled_ < int64_t(prompt_.size())) return;
  result_.stats.prefill_seconds = since(start_);
  ChunkOutput prefill = drafter_ ? concat_prefill(prefill_outputs_) : out;
  prefill_outputs_.clear();
  if (drafter_) drafter_->begin(prompt_, prefill);
  phase_ = Phase::Decode;
  if (options_.max_new_tokens <= 0) {
    phase_ = Phase::Done;
    result_.stats.seconds = since(start_);
    return;
  }
  anchor_ = sample_token(prefill.logits[0], options_.sampling, rng_);
  emit(anchor_);
}

void SpecSequence::emit(int64_t t) {
  if (phase_ == Phase::Done) return;
  result_.tokens.push_back(t);
  if (on_token_) on_token_(t);
  if (std::find(options_.eos_ids.begin(), options_.eos_ids.end(), t) != options_.eos_ids.end()) {
    result_.hit_eos = true;
    phase_ = Phase::Done;
  }
  if (int64_t(result_.tokens.size()) >= options_.max_new_tokens) phase_ = Phase::Done;
  if (phase_ == Phase::Done) result_.stats.seconds = since(start_);
}

void SpecSequence::stop() {
  if (phase_ == Phase::Done) return;
  phase_ = Phase::Done;
  result_.stats.seconds = since(start_);
}

void SpecSequence::draft(bool propose) {
  if (phase_ != Phase::Decode) fail("internal: draft outside the decode phase");
  proposal_ = {};
  schedule_ = false;
  survival_.clear();
  catch_up_seconds_ = 0;
  if (!propose) return;
  const SpecOptions& o = options_;
  const int64_t remaining = o.max_new_tokens - int64_t(result_.tokens.size());
  // Room for the anchor and n drafts in the context; no more drafts than tokens still wanted.
  int64_t n = drafter_ ? std::min({gamma_, remaining - 1, context() - cache_.length() - 1}) : 0;
  if (n <= 0) return;
  const auto t0 = Clock::now();
  drafter_->catch_up();
  catch_up_seconds_ = since(t0);
  proposal_ = drafter_->propose(anchor_, n, o.sampling, rng_);
  result_.stats.draft_seconds += since(t0);
  n = std::min<int64_t>(n, int64_t(proposal_.tokens.size()));
  if (o.verify == VerifyMode::Threshold && !proposal_.confidence.empty()) {
    int64_t cut = 0;
    while (cut < n && proposal_.confidence[size_t(cut)] >= o.conf_min) ++cut;
    n = cut;
  } else if ((o.verify == VerifyMode::Sts || o.verify == VerifyMode::Auto) && !proposal_.conf_logits.empty()) {
    const Calibration* cal = o.calibration_for(o.sampling);
    survival_ = cal ? cal->survival(proposal_.conf_logits) : Calibration{}.survival(proposal_.conf_logits);
    survival_.resize(size_t(n));
    if (o.verify == VerifyMode::Sts) {
      int64_t cut = 0;
      while (cut < n && survival_[size_t(cut)] >= o.conf_min) ++cut;
      n = cut;
    } else {
      if (!o.sps) fail("verify mode 'auto' needs an SPS profile (run dspark profile)");
      schedule_ = true;
    }
  }
  set_verify_length(n);
}

void SpecSequence::set_verify_length(int64_t n) {
  n = std::clamp<int64_t>(n, 0, int64_t(proposal_.tokens.size()));
  proposal_.tokens.resize(size_t(n));
  if (!proposal_.q.empty()) proposal_.q.resize(size_t(n));
  if (proposal_.conf_logits.size() > size_t(n)) proposal_.conf_logits.resize(size_t(n));
  if (proposal_.confidence.size() > size_t(n)) proposal_.confidence.resize(size_t(n));
}

SequenceChunk SpecSequence::verify_chunk() {
  if (phase_ != Phase::Decode) fail("internal: verify_chunk outside the decode phase");
  if (cache_.length() + 1 > context()) fail("internal: the context is full");
  verify_base_ = cache_.length();
  SequenceChunk chunk;
  chunk.cache = &cache_;
  chunk.tokens = {anchor_};
  chunk.tokens.insert(chunk.tokens.end(), proposal_.tokens.begin(), proposal_.tokens.end());
  chunk.logits = LogitsAt::All;
  return chunk;
}

void SpecSequence::finish_verify(const ChunkOutput& verify, double forward_seconds) {
  SpecStats& stats = result_.stats;
  stats.target_seconds += forward_seconds;
  const auto t2 = Clock::now();
  const int64_t n = int64_t(proposal_.tokens.size());
  int64_t accepted = 0, next = 0;
  if (options_.sampling.greedy()) {
    // The target's argmax at every verified position, fetched once ([n + 1] ids).
    const std::vector<int64_t> target = greedy_tokens(verify.logits);
    while (accepted < n && target[size_t(accepted)] == proposal_.tokens[size_t(accepted)]) ++accepted;
    next = target[size_t(accepted)];
  } else {
    at::Tensor p = processed_probabilities(verify.logits, options_.sampling);  // [n+1, V]
    SampledVerdict v = verify_sampled(p, proposal_.tokens, proposal_.q, rng_, options_.sampled_verify);
    accepted = v.accepted;
    next = v.next_token;
  }
  stats.accept_seconds += since(t2);
  if (options_.on_verify && n > 0) options_.on_verify(proposal_, accepted);
  ++stats.steps;
  stats.n_drafted += n;
  stats.n_accepted += accepted;
  last_verified_ = n;
  last_emitted_ = accepted + 1;
  for (int64_t k = 0; k < n; ++k) ++stats.drafted_at[size_t(k)];
  for (int64_t k = 0; k < accepted; ++k) ++stats.accepted_at[size_t(k)];

  // Keep the anchor and the accepted drafts; roll back the rest.
  cache_.truncate(verify_base_ + 1 + accepted);
  std::vector<int64_t> kept = {anchor_};
  kept.insert(kept.end(), proposal_.tokens.begin(), proposal_.tokens.begin() + accepted);
  if (drafter_) {
    const auto t3 = Clock::now();
    drafter_->commit(kept, verify);
    stats.draft_seconds += since(t3);
  }
  for (size_t i = 1; i < kept.size(); ++i) emit(kept[i]);
  emit(next);
  anchor_ = next;
  proposal_ = {};
  // No room left for the next anchor: the context is full.
  if (phase_ == Phase::Decode && cache_.length() + 1 > context()) stop();
}

SpecResult SpecSequence::take_result() { return std::move(result_); }

}  // namespace dspark
