// The serving engine: continuous batching of speculative decoding.
//
// One worker thread owns the target forward. Requests wait in a queue until one of `slots`
// sequences is free, then join the running batch between steps; every step (spec/decode_step.h)
// drafts for all decoding requests and verifies all their chunks together with the next prompt
// chunks of newly admitted requests in ONE ragged target forward. Requests leave as soon as they
// finish (EOS, length, a stop condition of the caller, cancellation).
//
// Callers (the HTTP server, tests, a load generator) submit a GenerationRequest and get a
// RequestState they can wait on; tokens are delivered to the request's callback on the worker
// thread as they are decided.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/drafter_factory.h"
#include "spec/speculation_governor.h"
#include "spec/speculative.h"

namespace dspark {

struct EngineOptions {
  int64_t slots = 4;             // sequences decoded together (--parallel)
  int64_t context = 0;           // tokens per sequence, prompt + generated (0: the model's)
  int64_t prefill_chunk = 256;   // prompt tokens per sequence per step
  int64_t prefill_budget = 512;  // prompt tokens per step over all sequences
  int64_t max_queue = 4096;      // requests waiting for a slot; more are refused
  // true: the engine starts its own worker thread. false: the caller runs the loop with run() on
  // the thread that loaded the model. On a machine with few cores this matters: every thread
  // that runs LibTorch operators keeps an OpenMP thread pool, and once libgomp manages more
  // threads than there are cores it stops spin-waiting between parallel regions (measured on 2
  // cores: 3.6 ms per token instead of 0.9 when the model was loaded on another thread).
  bool own_thread = true;
  // run() returns as soon as nothing is queued or running (a CLI that submitted its requests
  // before calling run(): `dspark generate`).
  bool stop_when_idle = false;
};

enum class FinishReason { None, Eos, Length, Stop, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);  // "stop" for Eos/Stop, "length", ...

struct GenerationRequest {
  std::vector<int64_t> prompt;
  int64_t max_new_tokens = 16;  // clipped to the context left after the prompt
  SamplingParams sampling;      // the rest (verify policy, gamma, EOS ids) is the engine's
  // Called on the worker thread with every emitted token; return false to end the request
  // (FinishReason::Stop), e.g. when a stop string appeared.
  std::function<bool(int64_t)> on_token;
};

// Shared between the worker and whoever submitted the request.
class RequestState {
 public:
  using Clock = std::chrono::steady_clock;

  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // Blocks until the request has finished (or `timeout` passed; false then).
  bool wait(std::chrono::milliseconds timeout = std::chrono::hours(24));
  bool finished() const;

  // Valid once finished.
  FinishReason finish_reason() const;
  const std::string& error() const { return error_; }
  const SpecResult& result() const { return result_; }
  Clock::time_point submitted_at() const { return submitted_at_; }
  Clock::time_point started_at() const { return started_at_; }    // admitted to a slot
  Clock::time_point finished_at() const { return finished_at_; }

 private:
  friend class Engine;
  void finish(FinishReason reason, SpecResult result, std::string error = {});

  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool finished_ = false;
  FinishReason reason_ = FinishReason::None;
  std::string error_;
  SpecResult result_;
  Clock::time_point submitted_at_, started_at_, finished_at_;
};

// Running totals (for /metrics); counters only grow.
struct EngineCounters {
  int64_t requests_finished = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t steps = 0;             // batched target forwards
  int64_t plain_steps = 0;       // of those, steps where auto mode chose not to draft
  int64_t busy_slot_steps = 0;   // sum over steps of the sequences in the forward
  int64_t spec_drafts = 0;       // verify steps that verified at least one draft
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_position;  // [k]: drafts accepted at position k
  double prompt_seconds = 0, decode_seconds = 0;
  double step_seconds = 0, forward_seconds = 0;  // wall time of the steps, of their target forwards
  int64_t processing = 0;        // gauges: requests in a slot / waiting
  int64_t waiting = 0;
};

class Engine {
 public:
  // `target` and `drafters` must outlive the engine. `base_options` are the defaults every
  // request's options start from (verify mode, calibration, SPS profile, gamma, eos ids).
  Engine(Transformer& target, const DrafterFactory& drafters, SpecOptions base_options, EngineOptions options);
  ~Engine();  // cancels whatever is still queued or running, joins the worker

  const EngineOptions& options() const { return options_; }
  const SpecOptions& base_options() const { return base_; }
  int64_t context() const { return context_; }

  // Queues a request. Throws dspark::Error when the engine is shutting down or the queue is full.
  // A prompt that does not fit the context finishes at once with FinishReason::Error.
  std::shared_ptr<RequestState> submit(GenerationRequest request);

  // The loop, on the calling thread (own_thread = false): returns after shutdown(), or with
  // stop_when_idle once nothing is queued or running; run() may then be called again for the
  // next requests (`dspark bench`: one prompt at a time).
  void run();

  // Stops taking requests; queued ones are cancelled; running ones finish (or are cancelled when
  // `drain` is false, or after `grace`). Returns when the loop has ended.
  void shutdown(bool drain, std::chrono::milliseconds grace = std::chrono::seconds(30));

  EngineCounters counters() const;

 private:
  struct Slot;
  void loop();
  void finish_slot(Slot& slot, FinishReason reason, const std::string& error = {});

  Transformer& target_;
  const DrafterFactory& drafters_;
  SpecOptions base_;
  EngineOptions options_;
  int64_t context_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::deque<std::pair<GenerationRequest, std::shared_ptr<RequestState>>> queue_;
  bool accepting_ = true;
  bool stop_ = false;
  bool cancel_running_ = false;
  bool loop_running_ = false, loop_done_ = false;
  EngineCounters counters_;
  std::vector<std::unique_ptr<Slot>> slots_;  // worker thread only
  SpeculationGovernor governor_;              // worker thread only
  std::thread worker_;
};

}  // namespace dspark
