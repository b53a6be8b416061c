#include "spec/decode_step.h"

#include <torch/torch.h>

#include <chrono>

#include "model/device.h"
#include "spec/scheduler.h"
#include "util/error.h"

namespace dspark {

StepReport decode_step(Transformer& target, const std::vector<SpecSequence*>& sequences, const StepOptions& options) {
  torch::NoGradGuard no_grad;
  StepReport report;
  std::vector<SpecSequence*> prefilling, decoding;
  for (SpecSequence* s : sequences) {
    if (s->done()) continue;
    (s->phase() == SpecSequence::Phase::Prefill ? prefilling : decoding).push_back(s);
  }
  // Whether auto-mode sequences draft at all this step (the drafter's cost vs what it saves).
  std::vector<SpecSequence*> automatic;
  for (SpecSequence* s : decoding)
    if (s->options().verify == VerifyMode::Auto && s->options().sps) automatic.push_back(s);
  const bool draft_auto = !options.governor || automatic.empty() ||
                          options.governor->should_draft(int64_t(automatic.size()), *automatic[0]->options().sps);
  report.drafting_skipped = !draft_auto;
  // A probe while plain decoding is ahead: one sequence drafts (rotating), not the whole batch.
  SpecSequence* prober = nullptr;
  if (draft_auto && options.governor && options.governor->probing() && !automatic.empty())
    prober = automatic[size_t(options.governor->skipped_steps()) % automatic.size()];
  // Drafts first (each drafter on its own), then one schedule for all auto-mode sequences.
  std::vector<SpecSequence*> scheduled;
  double auto_draft_seconds = 0;
  for (SpecSequence* s : decoding) {
    const bool is_auto = s->options().verify == VerifyMode::Auto && s->options().sps;
    const auto t0 = std::chrono::steady_clock::now();
    s->draft(!is_auto || (draft_auto && (!prober || s == prober)));
    if (is_auto) auto_draft_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s->wants_schedule()) scheduled.push_back(s);
  }
  if (!scheduled.empty()) {
    std::vector<std::vector<double>> survival;
    for (SpecSequence* s : scheduled) survival.push_back(s->survival());
    // The cycle's drafting (spent whatever is verified) and the forward's correction, both as the
    // governor measured them in earlier steps: this step's own drafting time can depend on the
    // drafts it drew (a sampled draw scans its row up to the token), and lengths chosen from it
    // would no longer depend on the drafts only through their survival, which keeps
    // verification exact.
    const SpeculationGovernor* g = options.governor;
    const std::vector<int64_t> lengths =
        schedule_verify_lengths(survival, *scheduled[0]->options().sps, true,
                                g ? g->draft_seconds() * double(scheduled.size()) : 0.0, g ? g->kappa(true) : 1.0);
    for (size_t i = 0; i < scheduled.size(); ++i) scheduled[i]->set_verify_length(lengths[i]);
  }

  std::vector<SequenceChunk> chunks;
  std::vector<SpecSequence*> owners;  // chunks[i] belongs to owners[i]; the first report.decode_sequences verify
  HiddenTaps taps;
  bool taps_set = false;
  auto add = [&](SpecSequence* s, SequenceChunk chunk) {
    const HiddenTaps t = s->taps();
    if (!taps_set) {
      taps = t;
      taps_set = true;
    } else if (t.layers != taps.layers || t.final_hidden != taps.final_hidden) {
      fail("decode_step: sequences with different drafter taps cannot share a forward");
    }
    chunks.push_back(std::move(chunk));
    owners.push_back(s);
  };
  for (SpecSequence* s : decoding) {
    add(s, s->verify_chunk());
    report.verify_tokens += int64_t(chunks.back().tokens.size());
  }
  report.decode_sequences = int64_t(decoding.size());
  for (SpecSequence* s : prefilling) {
    int64_t n = options.prefill_chunk;  // <= 0: the whole rest of the prompt
    if (options.prefill_budget > 0) {
      const int64_t room = options.prefill_budget - report.prefill_tokens;
      if (room <= 0) break;  // the first prefill chunk always fits: room = budget
      n = n > 0 ? std::min(n, room) : room;
    }
    add(s, s->prefill_chunk(n));
    report.prefill_tokens += int64_t(chunks.back().tokens.size());
  }
  if (chunks.empty()) return report;

  const auto start = std::chrono::steady_clock::now();
  std::vector<ChunkOutput> outputs = target.forward(chunks, taps);
  synchronize(target.device());  // a GPU forward returns once queued: time it to its end
  report.forward_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < owners.size(); ++i) {
    if (int64_t(i) < report.decode_sequences)
      owners[i]->finish_verify(outputs[i], report.forward_seconds);
    else
      owners[i]->finish_prefill_chunk(outputs[i], report.forward_seconds);
  }
  // The forward's measured time against the table, when it held the auto-mode sequences alone
  // (prompt chunks or other sequences in the same forward are not theirs to account for).
  const bool auto_alone = !automatic.empty() && automatic.size() == decoding.size() && report.prefill_tokens == 0;
  if (options.governor && auto_alone)
    options.governor->observe_forward(draft_auto, report.verify_tokens, report.decode_sequences,
                                      report.forward_seconds, *automatic[0]->options().sps);
  if (options.governor && draft_auto && !automatic.empty()) {
    double tokens = 0, verified = 0;
    const std::vector<SpecSequence*> drafted = prober ? std::vector<SpecSequence*>{prober} : automatic;
    for (SpecSequence* s : drafted) {
      tokens += double(s->last_emitted());
      verified += double(s->last_verified());
    }
    const double n = double(drafted.size());
    if (prober && auto_alone)
      options.governor->observe_probe(auto_draft_seconds, report.forward_seconds, prober->last_emitted(),
                                      report.decode_sequences, *automatic[0]->options().sps);
    for (SpecSequence* s : drafted) auto_draft_seconds -= s->catch_up_seconds();
    options.governor->observe(auto_draft_seconds / n, tokens / n, verified / n);
  }
  return report;
}

}  // namespace dspark
