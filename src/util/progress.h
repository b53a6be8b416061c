// A one-line progress display for long jobs: step i/n, a bar, the caller's metrics, rate and ETA.
// On a terminal it redraws in place; otherwise (logs, CI) it prints a line every `every` seconds.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace dspark {

class Progress {
 public:
  Progress(std::string label, int64_t total, double every_seconds = 10.0);
  // `done` of `total`; `metrics` e.g. "loss 2.31 | 1450 tok/s". `start_done` is where this run
  // began (resumed jobs), so the ETA uses this run's speed only.
  void update(int64_t done, const std::string& metrics, bool force = false);
  void finish(const std::string& metrics);
  void set_start(int64_t start_done);

 private:
  std::string label_;
  int64_t total_;
  int64_t start_done_ = 0;
  double every_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12s"

}  // namespace dspark
