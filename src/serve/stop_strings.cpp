#include "serve/stop_strings.h"

#include <algorithm>

namespace dspark::serve {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(const std::string& text) {
  if (matched_) return {};
  pending_ += text;
  if (stops_.empty()) return std::exchange(pending_, {});
  // A stop string cannot start in text already sent: every suffix that could begin one was held.
  size_t first = std::string::npos;
  for (const auto& stop : stops_) first = std::min(first, pending_.find(stop));
  if (first != std::string::npos) {
    matched_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& stop : stops_) {
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() { return matched_ ? std::string() : std::exchange(pending_, {}); }

}  // namespace dspark::serve
