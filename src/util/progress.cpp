#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace dspark {

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const int64_t s = int64_t(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

Progress::Progress(std::string label, int64_t total, double every_seconds)
    : label_(std::move(label)), total_(total), every_(every_seconds), tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()), last_(start_ - std::chrono::hours(1)) {}

void Progress::set_start(int64_t start_done) {
  start_done_ = start_done;
  start_ = std::chrono::steady_clock::now();
}

void Progress::update(int64_t done, const std::string& metrics, bool force) {
  const auto now = std::chrono::steady_clock::now();
  const double since_last = std::chrono::duration<double>(now - last_).count();
  if (!force && since_last < (tty_ ? 0.25 : every_)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int64_t run_done = done - start_done_;
  const double eta = run_done > 0 ? elapsed / double(run_done) * double(total_ - done) : -1.0;
  const int width = 24;
  const int filled = total_ > 0 ? int(width * std::min<int64_t>(done, total_) / total_) : 0;
  const std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
  const std::string line = fmt::format("{} {}/{} [{}] {} | elapsed {} | eta {}", label_, done, total_, bar, metrics,
                                       format_duration(elapsed), format_duration(eta));
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
  else
    std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void Progress::finish(const std::string& metrics) {
  update(total_, metrics, true);
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace dspark
