// Decoding-shaped linear layers: kernels/matmul vs at::linear, y[m, n] = x[m, k] w[n, k]^T.
//
// Shapes (k -> n): Qwen3-0.6B's 1024 -> 3072 (gate/up), 3072 -> 1024 (down), 1024 -> 151936
// (lm_head), and the default small model's 256 -> 768. m = 1, 2, 4, 8, 16 rows (decode steps,
// batched sequences). bytes_per_second counts the weight matrix plus x and y once per call: for
// these shapes the weights dominate, so it is the achieved weight-streaming rate.
// Threads: 2 for both implementations (the target machine's core count; `dspark ... -t 2`).
//
//   build-kern/dspark_bench --benchmark_filter=Matmul
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdlib>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"

namespace {

// DSPARK_BENCH_THREADS overrides (1 on a machine whose other core is busy: a 2-thread OpenMP team
// then spends its time waiting for the descheduled thread).
int bench_threads() {
  const char* v = std::getenv("DSPARK_BENCH_THREADS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 2;
}

// Kernel: the fastest path (AVX512-BF16 dot products for bf16 weights, x rounded to bf16).
// Exact: bf16 weights widened to f32 (what the default CPU "mixed" mode uses: f32 activations).
// TorchWidened: what dense() did for bf16 weights with more rows before row-invariant inference
// (at::linear on an f32 copy of the weights); prefill-shaped m = 64, 256 below.
// Dp: the AVX-512 BF16 dot-product path (the fastest before the AMX tiles), side by side.
enum class Impl { Kernel, Dp, Exact, Torch, TorchWidened };

template <Impl impl, c10::ScalarType dtype>
void BM_Matmul(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  at::set_num_threads(bench_threads());
  torch::manual_seed(0);
  at::Tensor x = torch::randn({m, k}).to(dtype);  // [m, k]
  at::Tensor w = torch::randn({n, k}).to(dtype);  // [n, k]
  at::Tensor xf = x.to(torch::kFloat32).contiguous();
  at::Tensor y = torch::empty({m, n});
  torch::NoGradGuard no_grad;
  using dspark::kernels::Isa;
  const Isa best = dspark::kernels::best_isa();
  const Isa isa_exact = best == Isa::Avx512Bf16 || best == Isa::Amx ? Isa::Avx512 : best;
  const Isa isa_dp = dspark::kernels::isa_supported(Isa::Avx512Bf16) ? Isa::Avx512Bf16 : isa_exact;
  for (auto _ : state) {
    if constexpr (impl == Impl::Torch) {
      benchmark::DoNotOptimize(at::linear(x, w));
    } else if constexpr (impl == Impl::TorchWidened) {
      benchmark::DoNotOptimize(at::linear(xf, w.to(torch::kFloat32)));
    } else if constexpr (impl == Impl::Exact || impl == Impl::Dp) {
      dspark::kernels::matmul_bf16_with(impl == Impl::Dp ? isa_dp : isa_exact, xf.data_ptr<float>(), k, m, k,
                                        reinterpret_cast<const uint16_t*>(w.data_ptr()), k, n, y.data_ptr<float>(), n);
      benchmark::ClobberMemory();
    } else if constexpr (dtype == torch::kBFloat16) {
      dspark::kernels::matmul_bf16(xf.data_ptr<float>(), m, k, reinterpret_cast<const uint16_t*>(w.data_ptr()), n,
                                   y.data_ptr<float>());
      benchmark::ClobberMemory();
    } else {
      dspark::kernels::matmul_f32(xf.data_ptr<float>(), m, k, w.data_ptr<float>(), n, y.data_ptr<float>());
      benchmark::ClobberMemory();
    }
  }
  const int64_t elem = dtype == torch::kBFloat16 ? 2 : 4;
  state.SetBytesProcessed(state.iterations() * (n * k + m * k + m * n) * elem);
  // f32 weights have no dot-product instruction: the BF16 path runs as plain AVX-512.
  Isa isa = impl == Impl::Exact ? isa_exact : impl == Impl::Dp ? isa_dp : best;
  if (dtype == torch::kFloat32 && (isa == Isa::Avx512Bf16 || isa == Isa::Amx)) isa = Isa::Avx512;
  state.SetLabel(impl == Impl::Torch ? "at::linear" : impl == Impl::TorchWidened ? "at::linear widened" : dspark::kernels::isa_name(isa));
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 3072}, {3072, 1024}, {1024, 151936}, {256, 768}})
    for (int64_t m : {1, 2, 4, 8, 16}) b->Args({m, k, n});
  b->ArgNames({"m", "k", "n"})->Unit(benchmark::kMicrosecond);
}

// Prefill / many batched sequences: since the server needs batch-independent rows, Transformer::
// forward sends every row count to the kernels (model/ops.h RowInvariantScope).
void PrefillShapes(benchmark::internal::Benchmark* b) {
  for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 3072}, {256, 768}})
    for (int64_t m : {64, 256}) b->Args({m, k, n});
  b->ArgNames({"m", "k", "n"})->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_Matmul<Impl::Kernel, torch::kBFloat16>)->Name("MatmulPrefill/kernel/bf16")->Apply(PrefillShapes);
BENCHMARK(BM_Matmul<Impl::Dp, torch::kBFloat16>)->Name("MatmulPrefill/dp/bf16")->Apply(PrefillShapes);
BENCHMARK(BM_Matmul<Impl::TorchWidened, torch::kBFloat16>)->Name("MatmulPrefill/torch-widened/bf16")->Apply(PrefillShapes);
BENCHMARK(BM_Matmul<Impl::Kernel, torch::kFloat32>)->Name("MatmulPrefill/kernel/f32")->Apply(PrefillShapes);
BENCHMARK(BM_Matmul<Impl::Torch, torch::kFloat32>)->Name("MatmulPrefill/torch/f32")->Apply(PrefillShapes);
BENCHMARK(BM_Matmul<Impl::Kernel, torch::kBFloat16>)->Name("Matmul/kernel/bf16")->Apply(Shapes);
BENCHMARK(BM_Matmul<Impl::Dp, torch::kBFloat16>)->Name("Matmul/dp/bf16")->Apply(Shapes);
BENCHMARK(BM_Matmul<Impl::Exact, torch::kBFloat16>)->Name("Matmul/exact/bf16")->Apply(Shapes);
BENCHMARK(BM_Matmul<Impl::Torch, torch::kBFloat16>)->Name("Matmul/torch/bf16")->Apply(Shapes);
BENCHMARK(BM_Matmul<Impl::Kernel, torch::kFloat32>)->Name("Matmul/kernel/f32")->Apply(Shapes);
BENCHMARK(BM_Matmul<Impl::Torch, torch::kFloat32>)->Name("Matmul/torch/f32")->Apply(Shapes);

}  // namespace

namespace {

// Decoding streams every weight matrix from memory once per token (the default model's 71 MB of
// bf16 weights exceed the last-level cache), while the benchmarks above re-read one matrix that
// stays in cache. Here each call takes the next matrix of a pool larger than any LLC (256 MiB), so
// bytes_per_second is the DRAM streaming rate the model actually sees. Shapes: the default
// model's 512 -> 512 (q/o), 512 -> 1536 (gate/up), 1536 -> 512 (down), 512 -> 8192 (LM head); Qwen3-0.6B's
// 1024 -> 3072.
// With `cached`, the pool is one matrix that stays in cache: the kernel's compute ceiling.
template <bool packed, bool cached = false>
void BM_MatmulStream(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  if (packed && !dspark::kernels::packed_bf16_supported()) return state.SkipWithError("no packed path");
  at::set_num_threads(bench_threads());
  const int64_t pool = cached ? 1 : std::max<int64_t>(2, (int64_t(256) << 20) / (n * k * 2));
  torch::manual_seed(0);
  at::Tensor w = torch::randn({pool, n, k}).to(torch::kBFloat16);  // [pool, n, k]
  at::Tensor x = torch::randn({m, k});
  at::Tensor y = torch::empty({m, n});
  const auto* w0 = reinterpret_cast<const uint16_t*>(w.data_ptr());
  std::vector<dspark::kernels::PackedBf16> panels;
  if (packed)
    for (int64_t i = 0; i < pool; ++i) {
      panels.push_back(dspark::kernels::pack_bf16(w0 + i * n * k, k, n, k));
      panels.back().streamed = !cached;  // as a target's weights beyond the cache (model/packed_weights)
    }
  int64_t next = 0;
  for (auto _ : state) {
    if (packed)
      dspark::kernels::matmul_bf16_packed(x.data_ptr<float>(), k, m, panels[size_t(next)], y.data_ptr<float>(), n);
    else
      dspark::kernels::matmul_bf16(x.data_ptr<float>(), m, k, w0 + next * n * k, n, y.data_ptr<float>());
    benchmark::ClobberMemory();
    next = (next + 1) % pool;
  }
  state.SetBytesProcessed(state.iterations() * n * k * 2);
  state.SetLabel(packed ? std::string("packed ") + dspark::kernels::isa_name(dspark::kernels::packed_bf16_isa())
                        : dspark::kernels::isa_name(dspark::kernels::best_isa()));
}

void StreamShapes(benchmark::internal::Benchmark* b) {
  for (auto [k, n] : {std::pair<int64_t, int64_t>{512, 512}, {512, 1536}, {1536, 512}, {512, 8192}, {1024, 3072}})
    for (int64_t m : {1, 4, 8, 16}) b->Args({m, k, n});
  b->ArgNames({"m", "k", "n"})->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_MatmulStream<false>)->Name("MatmulStream/kernel/bf16")->Apply(StreamShapes);
BENCHMARK(BM_MatmulStream<false, true>)->Name("MatmulCached/kernel/bf16")->Apply(StreamShapes);
BENCHMARK(BM_MatmulStream<true>)->Name("MatmulStream/packed/bf16")->Apply(StreamShapes);
BENCHMARK(BM_MatmulStream<true, true>)->Name("MatmulCached/packed/bf16")->Apply(StreamShapes);

}  // namespace
