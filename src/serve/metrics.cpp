#include "serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace dspark::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard lock(mutex_);
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard lock(mutex_);
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return out;
}

ServerMetrics::ServerMetrics()
    : e2e_latency({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}),
      time_to_first_token({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}) {}

namespace {
void metric(std::string& out, const char* type, const std::string& name, const std::string& help, double value) {
  out += fmt::format("# HELP dspark:{} {}\n# TYPE dspark:{} {}\ndspark:{} {}\n", name, help, name, type, name, value);
}
}  // namespace

std::string render_metrics(const EngineCounters& e, ServerMetrics& s) {
  std::string out;
  metric(out, "counter", "requests_total", "Requests that finished normally.", double(e.requests_finished));
  metric(out, "counter", "prompt_tokens_total", "Prompt tokens processed.", double(e.prompt_tokens));
  metric(out, "counter", "prompt_seconds_total", "Prompt processing time.", e.prompt_seconds);
  metric(out, "counter", "tokens_predicted_total", "Generated tokens.", double(e.generated_tokens));
  metric(out, "counter", "tokens_predicted_seconds_total", "Generation time.", e.decode_seconds);
  metric(out, "counter", "n_decode_total", "Batched target forwards.", double(e.steps));
  metric(out, "gauge", "n_busy_slots_per_decode", "Mean sequences per target forward.",
         e.steps > 0 ? double(e.busy_slot_steps) / double(e.steps) : 0.0);
  metric(out, "gauge", "requests_processing", "Requests in a slot.", double(e.processing));
  metric(out, "gauge", "requests_deferred", "Requests waiting for a slot.", double(e.waiting));
  {
    std::lock_guard lock(s.mutex);
    metric(out, "counter", "requests_cancelled_total", "Requests cancelled (client gone, shutdown).", double(s.cancelled));
    metric(out, "counter", "http_client_errors_total", "Responses with a 4xx status.", double(s.http_errors_4xx));
    metric(out, "counter", "http_server_errors_total", "Responses with a 5xx status.", double(s.http_errors_5xx));
  }
  out += s.e2e_latency.render("dspark:e2e_request_latency_seconds", "End-to-end request latency.");
  out += s.time_to_first_token.render("dspark:time_to_first_token_seconds", "Time to the first generated token.");
  metric(out, "counter", "spec_decode_num_drafts_total", "Verify steps that verified at least one draft token.",
         double(e.spec_drafts));
  metric(out, "counter", "spec_decode_num_draft_tokens_total", "Draft tokens verified.", double(e.spec_draft_tokens));
  metric(out, "counter", "spec_decode_plain_steps_total",
         "Steps where auto verification expected drafting not to pay and decoded plainly.", double(e.plain_steps));
  metric(out, "counter", "spec_decode_num_accepted_tokens_total", "Draft tokens accepted.",
         double(e.spec_accepted_tokens));
  if (!e.spec_accepted_per_position.empty()) {
    const std::string name = "dspark:spec_decode_num_accepted_tokens_per_pos_total";
    out += fmt::format("# HELP {} Draft tokens accepted at each position (zero-based).\n# TYPE {} counter\n", name, name);
    for (size_t k = 0; k < e.spec_accepted_per_position.size(); ++k)
      out += fmt::format("{}{{position=\"{}\"}} {}\n", name, k, e.spec_accepted_per_position[k]);
  }
  return out;
}

}  // namespace dspark::serve
