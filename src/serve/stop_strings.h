// Stop strings (`stop` in the OpenAI API): generated text is cut before the first occurrence of
// any of them, and text that could still turn into one is held back from the stream until it is
// decided, so a streamed response never shows part of a stop string.
#pragma once
#include <string>
#include <vector>

namespace dspark::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Appends generated text; returns what can be sent now. Once a stop string is complete,
  // matched() is true and the returned text ends right before it; later pushes return "".
  std::string push(const std::string& text);
  // At the end of generation: the held-back text (it never became a stop string).
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // held back: a suffix that is a prefix of some stop string
  bool matched_ = false;
};

}  // namespace dspark::serve
