// /metrics in Prometheus' text format (version 0.0.4), named as llama.cpp's server and vLLM name
// them, with the prefix "dspark:": request and token counters, latency histograms, and the
// speculative-decoding counters of vLLM's schema (spec_decode_num_drafts_total,
// ..._num_draft_tokens_total, ..._num_accepted_tokens_total,
// ..._num_accepted_tokens_per_pos_total{position="k"}, k zero-based). Mean acceptance length =
// 1 + accepted / drafts.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace dspark::serve {

// A cumulative histogram (le buckets in seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // "# HELP", "# TYPE" and the _bucket / _sum / _count lines.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

// What the HTTP layer counts on top of the engine's counters.
struct ServerMetrics {
  ServerMetrics();
  Histogram e2e_latency, time_to_first_token;
  std::mutex mutex;
  int64_t http_errors_4xx = 0, http_errors_5xx = 0, cancelled = 0;
};

std::string render_metrics(const EngineCounters& engine, ServerMetrics& server);

}  // namespace dspark::serve
