// Ctrl-C / SIGTERM for long jobs: while an InterruptFlag lives, the first signal only sets a flag
// (the job finishes its step, checkpoints and exits); a second one terminates at once.
#pragma once

namespace dspark {

class InterruptFlag {
 public:
  InterruptFlag();
  ~InterruptFlag();
  InterruptFlag(const InterruptFlag&) = delete;
  InterruptFlag& operator=(const InterruptFlag&) = delete;
  bool raised() const;
};

}  // namespace dspark
