// SiLU over a decoding-shaped activation [m, F]: kernels/activation (one scalar formula per
// element, row-invariant) vs LibTorch's vectorised torch::silu. F = 1536 (the mid-size model's
// FFN), 3072 (Qwen3-0.6B), m = 1, 8, 256 rows. 1 thread (DSPARK_BENCH_THREADS overrides).
//
//   build/dspark_bench --benchmark_filter=Silu
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdlib>

#include "kernels/activation.h"

namespace {

int bench_threads() {
  const char* v = std::getenv("DSPARK_BENCH_THREADS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 1;
}

template <bool own>
void BM_Silu(benchmark::State& state) {
  const int64_t m = state.range(0), f = state.range(1);
  at::set_num_threads(bench_threads());
  at::Tensor x = torch::randn({m, f});
  at::Tensor y = torch::empty_like(x);
  for (auto _ : state) {
    if (own) {
      dspark::kernels::silu_f32(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    } else {
      y = torch::silu(x);
    }
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int64_t f : {1536, 3072})
    for (int64_t m : {1, 8, 256}) b->Args({m, f});
}

BENCHMARK(BM_Silu<true>)->Name("Silu/own")->Apply(Shapes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Silu<false>)->Name("Silu/torch")->Apply(Shapes)->Unit(benchmark::kMicrosecond);

}  // namespace
