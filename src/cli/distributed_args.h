// Distributed-training options shared by `train` and `train-lm`, and the one-machine launcher.
//
//   --world-size W --rank R --master ADDR:PORT   one rank of W (start each yourself, any machines)
//   --nproc N                                    start N ranks here on a free loopback port
//   --dist-timeout S                             rendezvous and per-collective timeout
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "train/distributed.h"

namespace dspark::cli {

struct DistributedArgs {
  int world_size = 1;
  int rank = 0;
  std::string master;
  double timeout_seconds = 60;
  int nproc = 0;
  void add_to(CLI::App* app);
  DistOptions options(bool cuda) const;
  bool launching() const { return nproc > 0; }
};

// --nproc N: runs N copies of this very command line (without --nproc) as ranks 0..N-1 of one
// process group that meets on a free 127.0.0.1 port. Returns the first non-zero exit status of a
// rank (128 + signal for a killed one) or 0. When one rank fails, the others get `grace_seconds`
// to report their own error and are then killed. SIGTERM to the launcher goes to every rank;
// Ctrl-C reaches them through the terminal (each finishes its step and rank 0 checkpoints).
int launch_local_ranks(int nproc, double grace_seconds);
constexpr double kLaunchGraceSeconds = 10;

}  // namespace dspark::cli
