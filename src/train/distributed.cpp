#include "train/distributed.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <cstdlib>
#include <unistd.h>

#include "util/error.h"

// c10d ships with LibTorch; its Gloo process group needs the Gloo headers (Debian: libgloo-dev)
// and, in LibTorch's own headers, USE_C10D_GLOO. NCCL only where the build asks for it and
// nccl.h is at hand (CMakeLists.txt).
#if __has_include(<gloo/algorithm.h>) && __has_include(<torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>)
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#define DSPARK_HAVE_C10D 1
#if defined(USE_C10D_NCCL) && __has_include(<nccl.h>) && __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define DSPARK_HAVE_NCCL 1
#endif
#endif

namespace dspark {

namespace {

#ifdef DSPARK_HAVE_C10D
// LibTorch 2 split the per-backend groups (Gloo, NCCL) off ProcessGroup into c10d::Backend.
#if TORCH_VERSION_MAJOR >= 2
using BackendGroup = c10d::Backend;
#else
using BackendGroup = c10d::ProcessGroup;
#endif
#endif

// The first line of a c10d / Gloo message (they carry backtraces and source locations).
std::string first_line(const std::string& message) {
  std::string out = message.substr(0, message.find('\n'));
  return out.empty() ? "unknown error" : out;
}

}  // namespace

std::pair<std::string, uint16_t> parse_master_address(const std::string& master) {
  const size_t colon = master.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == master.size())
    fail("--master must be ADDR:PORT, got '{}'", master);
  const std::string port_text = master.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port < 1 || port > 65535) fail("--master port must be 1..65535, got '{}'", port_text);
  std::string host = master.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, uint16_t(port)};
}

struct DataParallel::Impl {
#ifdef DSPARK_HAVE_C10D
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<BackendGroup> group;
#endif
  bool on_gpu = false;  // the group reduces CUDA buffers (NCCL)
  std::chrono::milliseconds timeout{60000};
  int rank = 0;

  template <typename Op>
  void run(const char* what, Op&& op) {
#ifdef DSPARK_HAVE_C10D
    try {
      auto work = op();
      work->wait(timeout);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail("rank {}: distributed {} failed ({}); another rank probably exited, see its error", rank, what,
           first_line(e.what()));
    }
#endif
  }
};

DataParallel::DataParallel() = default;

DataParallel::DataParallel(const DistOptions& o) : rank_(o.rank), world_size_(o.world_size) {
  if (o.world_size < 1) fail("--world-size must be >= 1");
  if (o.rank < 0 || o.rank >= o.world_size) fail("--rank must be in 0..{} for --world-size {}", o.world_size - 1, o.world_size);
  if (!(o.timeout_seconds > 0)) fail("--dist-timeout must be positive");
  if (const char* fault = std::getenv("DSPARK_DIST_FAULT")) {
    int fault_rank = -1;
    long long fault_step = -1;
    if (std::sscanf(fault, "%d:%lld", &fault_rank, &fault_step) == 2 && fault_rank == o.rank) fault_step_ = fault_step;
  }
  if (o.world_size == 1) return;
  if (o.master.empty()) fail("--world-size {} needs --master ADDR:PORT (rank 0's address)", o.world_size);
  const auto [host, port] = parse_master_address(o.master);
#ifndef DSPARK_HAVE_C10D
  fail("this build has no c10d process groups (LibTorch's Gloo headers were missing); train with one process");
#else
  impl_ = std::make_unique<Impl>();
  impl_->rank = o.rank;
  impl_->timeout = std::chrono::milliseconds(int64_t(o.timeout_seconds * 1000));
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = port;
    store_options.isServer = o.rank == 0;
    store_options.numWorkers = size_t(o.world_size);
    store_options.waitWorkers = true;
    store_options.timeout = impl_->timeout;
    impl_->store = c10::make_intrusive<c10d::PrefixStore>(
        "dspark", c10::make_intrusive<c10d::TCPStore>(host, store_options));
  } catch (const std::exception& e) {
    fail("rank {}: cannot meet the other {} ranks at {} within {} s ({})", o.rank, o.world_size - 1, o.master,
         o.timeout_seconds, first_line(e.what()));
  }
  try {
#ifdef DSPARK_HAVE_NCCL
    if (o.cuda) {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = impl_->timeout;
      impl_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, o.rank, o.world_size, options);
      impl_->on_gpu = true;
    }
#endif
    if (!impl_->group) {
      auto options = c10d::ProcessGroupGloo::Options::create(impl_->timeout);
      // Loopback rendezvous (one machine): bind there. Otherwise the interface named by
      // GLOO_SOCKET_IFNAME, or the one this machine's hostname resolves to.
      const bool loopback = host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"))
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (loopback)
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
      else
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, o.rank, o.world_size, options);
    }
  } catch (const std::exception& e) {
    fail("rank {}: cannot meet the other {} ranks at {} within {} s (process group: {})", o.rank, o.world_size - 1,
         o.master, o.timeout_seconds, first_line(e.what()));
  }
#endif
}

DataParallel::~DataParallel() = default;

std::pair<int64_t, int64_t> DataParallel::shard(int64_t global_rows) const {
  if (global_rows % world_size_ != 0)
    fail("--batch-size {} (the global batch) must be a multiple of the world size {}", global_rows, world_size_);
  const int64_t per_rank = global_rows / world_size_;
  return {rank_ * per_rank, (rank_ + 1) * per_rank};
}

void DataParallel::all_reduce_sum(const std::vector<at::Tensor>& tensors) {
  if (world_size_ == 1 || tensors.empty()) return;
#ifdef DSPARK_HAVE_C10D
  bool wide = false;
  for (const auto& t : tensors) wide = wide || t.scalar_type() == at::kDouble;
  const auto options = torch::TensorOptions()
                           .dtype(wide ? at::kDouble : at::kFloat)
                           .device(impl_->on_gpu ? tensors.front().device() : torch::Device(torch::kCPU));
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.detach().reshape({-1}).to(options));
  std::vector<at::Tensor> buffer{torch::cat(flat)};
  impl_->run("all-reduce", [&] { return impl_->group->allreduce(buffer); });
  int64_t offset = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.numel();
    torch::NoGradGuard no_grad;
    t.copy_(buffer[0].narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
#endif
}

void DataParallel::all_reduce_mean(const std::vector<at::Tensor>& tensors) {
  all_reduce_sum(tensors);
  if (world_size_ == 1) return;
  torch::NoGradGuard no_grad;
  for (const auto& t : tensors) t.div_(double(world_size_));
}

void DataParallel::broadcast(const std::vector<at::Tensor>& tensors, int root) {
  if (world_size_ == 1 || tensors.empty()) return;
#ifdef DSPARK_HAVE_C10D
  for (const auto& t : tensors) {
    // Gloo moves raw elements; bf16 / f16 travel as 16-bit integers with the same bits.
    at::Tensor staged = t.detach().to(impl_->on_gpu ? t.device() : torch::Device(torch::kCPU)).contiguous();
    if (staged.scalar_type() == at::kBFloat16 || staged.scalar_type() == at::kHalf) staged = staged.view(at::kShort);
    if (staged.scalar_type() == at::kBool) staged = staged.to(at::kByte);
    std::vector<at::Tensor> buffer{staged};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    impl_->run("broadcast", [&] { return impl_->group->broadcast(buffer, options); });
    torch::NoGradGuard no_grad;
    at::Tensor back = buffer[0];
    if (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf) back = back.view(t.scalar_type());
    t.copy_(back);
  }
#endif
}

int64_t DataParallel::broadcast_value(int64_t value, int root) {
  at::Tensor t = torch::tensor({value}, torch::kInt64);
  broadcast({t}, root);
  return t.item<int64_t>();
}

std::vector<double> DataParallel::sum_gradients(const std::vector<at::Tensor>& params, const std::vector<double>& values) {
  if (world_size_ == 1) return values;
  std::vector<at::Tensor> tensors;
  for (const auto& p : params)
    if (p.grad().defined()) tensors.push_back(p.grad());
  at::Tensor summed = torch::tensor(values, torch::kFloat32);
  tensors.push_back(summed);
  all_reduce_sum(tensors);
  std::vector<double> out;
  for (int64_t i = 0; i < summed.numel(); ++i) out.push_back(summed[i].item<double>());
  return out;
}

void DataParallel::barrier() {
  if (world_size_ == 1) return;
#ifdef DSPARK_HAVE_C10D
  impl_->run("barrier", [&] { return impl_->group->barrier(); });
#endif
}

void DataParallel::fault_point(int64_t step) const {
  if (fault_step_ >= 0 && step == fault_step_) _exit(3);
}

}  // namespace dspark
