// Data-parallel training over a c10d process group: W processes (ranks) each run the same model
// on their own share of every global batch, and their gradients are summed before the optimizer
// step, so every rank takes the same step and keeps identical parameters.
//
// Rendezvous: rank 0 serves a TCP store at --master ADDR:PORT; the other ranks connect to it.
// Backend: Gloo (CPU tensors; CUDA tensors are staged through the host), or NCCL for CUDA tensors
// when the build defines USE_C10D_NCCL. Every collective runs under the process-group timeout: a
// rank that died makes the others fail with a one-line dspark::Error instead of hanging.
//
// A DataParallel for one process (world size 1) does nothing and needs no c10d at all.
#pragma once
#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dspark {

struct DistOptions {
  int world_size = 1;
  int rank = 0;
  std::string master;          // ADDR:PORT of rank 0's store (required when world_size > 1)
  double timeout_seconds = 60; // store rendezvous and every collective
  bool cuda = false;           // gradients live on a GPU: NCCL where the build has it
};

// "ADDR:PORT" -> {ADDR, PORT}; throws dspark::Error on anything else.
std::pair<std::string, uint16_t> parse_master_address(const std::string& master);

class DataParallel {
 public:
  DataParallel();  // one process
  explicit DataParallel(const DistOptions& options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool main() const { return rank_ == 0; }  // the rank that writes checkpoints, logs and progress
  bool distributed() const { return world_size_ > 1; }

  // Rows [begin, end) of a global batch of `global_rows` that this rank handles: contiguous equal
  // shares in rank order. Throws unless world_size divides global_rows.
  std::pair<int64_t, int64_t> shard(int64_t global_rows) const;

  // In place, element-wise over all ranks. The tensors may have different shapes, dtypes and
  // devices: they are reduced together in one float32 (float64 where given) buffer.
  void all_reduce_sum(const std::vector<at::Tensor>& tensors);
  void all_reduce_mean(const std::vector<at::Tensor>& tensors);
  // In place: every rank ends with `root`'s values.
  void broadcast(const std::vector<at::Tensor>& tensors, int root = 0);
  int64_t broadcast_value(int64_t value, int root = 0);
  // The data-parallel step: sums the gradients of `params` (those that have one) and `values`
  // over all ranks in one collective; returns the summed values. One process: returns `values`.
  std::vector<double> sum_gradients(const std::vector<at::Tensor>& params, const std::vector<double>& values);
  void barrier();

  // Test hook for failure handling: with DSPARK_DIST_FAULT=RANK:STEP in the environment, that
  // rank exits (status 3, no message) when it reaches that step.
  void fault_point(int64_t step) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_size_ = 1;
  int64_t fault_step_ = -1;
};

}  // namespace dspark
