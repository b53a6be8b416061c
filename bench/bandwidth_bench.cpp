// Memory read bandwidth (kernels/bandwidth): the limit every decode benchmark is stated against.
//
//   build/dspark_bench --benchmark_filter=ReadBandwidth
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include "kernels/bandwidth.h"

namespace {

void BM_ReadBandwidth(benchmark::State& state) {
  at::set_num_threads(int(state.range(0)));
  dspark::kernels::BandwidthResult r;
  for (auto _ : state) r = dspark::kernels::measure_read_bandwidth(int64_t(1) << 30, 3);
  state.counters["GB/s"] = r.bytes_per_second / 1e9;
}

BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->ArgName("threads")->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
