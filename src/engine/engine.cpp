#include "engine/engine.h"

#include <torch/torch.h>

#include <algorithm>

#include "spec/decode_step.h"
#include "spec/spec_sequence.h"
#include "util/error.h"

namespace dspark {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Eos:
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
    case FinishReason::None: break;
  }
  return "none";
}

bool RequestState::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return done_cv_.wait_for(lock, timeout, [&] { return finished_; });
}

bool RequestState::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

FinishReason RequestState::finish_reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

void RequestState::finish(FinishReason reason, SpecResult result, std::string error) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    reason_ = reason;
    result_ = std::move(result);
    error_ = std::move(error);
    finished_at_ = Clock::now();
    finished_ = true;
  }
  done_cv_.notify_all();
}

// A request in one of the engine's slots: its drafter instance and its sequence state.
struct Engine::Slot {
  std::shared_ptr<RequestState> state;
  std::function<bool(int64_t)> on_token;
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<SpecSequence> sequence;
  bool stopped_by_caller = false;
  bool finished = false;
};

Engine::Engine(Transformer& target, const DrafterFactory& drafters, SpecOptions base_options, EngineOptions options)
    : target_(target), drafters_(drafters), base_(std::move(base_options)), options_(options) {
  const int64_t model_context = target.config().max_position_embeddings;
  if (options_.slots < 1) fail("--parallel must be >= 1 (got {})", options_.slots);
  if (options_.context < 0) fail("--ctx must be >= 0 (got {})", options_.context);
  if (options_.prefill_chunk < 1 || options_.prefill_budget < 1) fail("prefill chunk and budget must be >= 1");
  context_ = options_.context > 0 ? std::min(options_.context, model_context) : model_context;
  if (options_.own_thread) {
    // OpenMP's thread count is per calling thread: the worker takes the one the caller set.
    const int threads = at::get_num_threads();
    loop_running_ = true;
    worker_ = std::thread([this, threads] {
      at::set_num_threads(threads);
      loop();
    });
  }
}

Engine::~Engine() { shutdown(/*drain=*/false, std::chrono::milliseconds(0)); }

std::shared_ptr<RequestState> Engine::submit(GenerationRequest request) {
  validate(request.sampling);
  auto state = std::make_shared<RequestState>();
  state->submitted_at_ = RequestState::Clock::now();
  if (request.prompt.empty()) fail("the prompt is empty");
  if (request.max_new_tokens < 0) fail("max_tokens must be >= 0");
  for (int64_t t : request.prompt)
    if (t < 0 || t >= target_.config().vocab_size) fail("token id {} is outside the vocabulary", t);
  if (int64_t(request.prompt.size()) >= context_)
    fail("request ({} tokens) exceeds the available context size ({} tokens)", request.prompt.size(), context_);
  request.max_new_tokens = std::min(request.max_new_tokens, context_ - int64_t(request.prompt.size()));
  {
    std::lock_guard lock(mutex_);
    if (!accepting_) fail("the server is shutting down");
    if (int64_t(queue_.size()) >= options_.max_queue) fail("the request queue is full ({} waiting)", queue_.size());
    queue_.emplace_back(std::move(request), state);
    counters_.waiting = int64_t(queue_.size());
  }
  work_cv_.notify_all();
  return state;
}

void Engine::finish_slot(Slot& slot, FinishReason reason, const std::string& error) {
  if (slot.finished) return;
  slot.finished = true;
  SpecResult result = slot.sequence ? slot.sequence->take_result() : SpecResult{};
  if (reason != FinishReason::Error && reason != FinishReason::Cancelled) {
    const SpecStats& s = result.stats;
    std::lock_guard lock(mutex_);
    EngineCounters& c = counters_;
    ++c.requests_finished;
    c.prompt_tokens += slot.sequence->prompt_length();
    c.generated_tokens += int64_t(result.tokens.size());
    c.spec_drafts += s.drafted_at.empty() ? 0 : s.drafted_at[0];
    c.spec_draft_tokens += s.n_drafted;
    c.spec_accepted_tokens += s.n_accepted;
    if (c.spec_accepted_per_position.size() < s.accepted_at.size())
      c.spec_accepted_per_position.resize(s.accepted_at.size(), 0);
    for (size_t k = 0; k < s.accepted_at.size(); ++k) c.spec_accepted_per_position[k] += s.accepted_at[k];
    c.prompt_seconds += s.prefill_seconds;
    c.decode_seconds += s.seconds - s.prefill_seconds;
  }
  slot.state->finish(reason, std::move(result), error);
}

void Engine::run() {
  {
    std::lock_guard lock(mutex_);
    if (options_.own_thread || loop_running_ || loop_done_) fail("internal: Engine::run with own_thread, twice at once, or after shutdown");
    loop_running_ = true;
  }
  loop();
}

void Engine::loop() {
  StepOptions step;
  step.prefill_chunk = options_.prefill_chunk;
  step.prefill_budget = options_.prefill_budget;
  step.governor = &governor_;
  std::unique_lock lock(mutex_);
  while (true) {
    if (options_.stop_when_idle && queue_.empty() && slots_.empty()) break;
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !slots_.empty(); });
    if (stop_ && queue_.empty() && slots_.empty()) break;
    // Admission: new requests join the running batch between steps.
    while (int64_t(slots_.size()) < options_.slots && !queue_.empty()) {
      auto [request, state] = std::move(queue_.front());
      queue_.pop_front();
      auto slot = std::make_unique<Slot>();
      slot->state = state;
      slot->on_token = std::move(request.on_token);
      state->started_at_ = RequestState::Clock::now();
      if (state->cancelled()) {
        state->finish(FinishReason::Cancelled, {});
        continue;
      }
      SpecOptions o = base_;
      o.max_new_tokens = request.max_new_tokens;
      o.sampling = request.sampling;
      Slot* raw = slot.get();
      try {
        slot->drafter = drafters_.make();
        slot->sequence = std::make_unique<SpecSequence>(
            target_, slot->drafter.get(), std::move(request.prompt), o, [raw](int64_t token) {
              if (raw->on_token && !raw->on_token(token)) {
                raw->stopped_by_caller = true;
                raw->sequence->stop();
              }
            });
      } catch (const std::exception& e) {
        state->finish(FinishReason::Error, {}, e.what());
        continue;
      }
      slots_.push_back(std::move(slot));
    }
    const bool cancel_all = cancel_running_;
    counters_.waiting = int64_t(queue_.size());
    counters_.processing = int64_t(slots_.size());
    lock.unlock();

    std::vector<SpecSequence*> batch;
    for (auto& slot : slots_) {
      if (cancel_all || slot->state->cancelled()) finish_slot(*slot, FinishReason::Cancelled);
      else if (!slot->sequence->done()) batch.push_back(slot->sequence.get());
    }
    StepReport report;
    const auto step_start = std::chrono::steady_clock::now();
    if (!batch.empty()) {
      try {
        report = decode_step(target_, batch, step);
      } catch (const std::exception& e) {
        // A failing forward (out of memory, a bug) fails the requests in it, not the server.
        for (auto& slot : slots_) finish_slot(*slot, FinishReason::Error, e.what());
      }
    }
    for (auto& slot : slots_) {
      if (slot->finished || !slot->sequence->done()) continue;
      const FinishReason reason = slot->stopped_by_caller          ? FinishReason::Stop
                                  : slot->sequence->result().hit_eos ? FinishReason::Eos
                                                                     : FinishReason::Length;
      finish_slot(*slot, reason);
    }

    lock.lock();
    if (!batch.empty()) {
      ++counters_.steps;
      counters_.step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
      counters_.forward_seconds += report.forward_seconds;
      if (report.drafting_skipped) ++counters_.plain_steps;
      counters_.busy_slot_steps += int64_t(batch.size());
    }
    slots_.erase(std::remove_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->finished; }), slots_.end());
    counters_.processing = int64_t(slots_.size());
    if (slots_.empty()) work_cv_.notify_all();  // shutdown() waits for an idle worker
  }
  loop_running_ = false;
  loop_done_ = stop_;  // an idle return (stop_when_idle) may be followed by another run()
  lock.unlock();
  work_cv_.notify_all();
}

void Engine::shutdown(bool drain, std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  accepting_ = false;
  for (auto& [request, state] : queue_) state->finish(FinishReason::Cancelled, {}, "the server is shutting down");
  queue_.clear();
  counters_.waiting = 0;
  stop_ = true;
  if (!drain) cancel_running_ = true;
  work_cv_.notify_all();
  if (drain && !work_cv_.wait_for(lock, grace, [&] { return slots_.empty(); })) cancel_running_ = true;
  work_cv_.notify_all();
  // Until the loop has ended (on the worker, or on whichever thread called run()).
  work_cv_.wait(lock, [&] { return !loop_running_; });
  lock.unlock();
  if (worker_.joinable()) worker_.join();
}

EngineCounters Engine::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace dspark
