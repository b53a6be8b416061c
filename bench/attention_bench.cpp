// Attention of a chunk of m new queries over a KV cache: kernels/attention vs the LibTorch
// operators the model used before (grouped matmuls, causal mask, softmax).
//
// Shapes: the small default model (4 query heads / 2 KV heads, D = 64), the default model (8 / 4,
// D = 64) and Qwen3-0.6B (16 / 8, D = 128),
// 512 cached positions, m = 1, 4, 8, 16 queries. 2 threads.
//
//   build/dspark_bench --benchmark_filter=Attention
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cmath>

#include "kernels/attention.h"

namespace {

enum class Impl { Kernel, Torch };

// m new queries after `context` cached keys.
dspark::kernels::AttentionShape shape_of(int64_t m, int64_t heads, int64_t kv_heads, int64_t D, int64_t context) {
  dspark::kernels::AttentionShape a;
  a.tokens = m;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  a.keys = context + m;
  a.position0 = context;
  a.scale = float(1.0 / std::sqrt(double(D)));
  return a;
}

template <Impl impl>
void BM_Attention(benchmark::State& state) {
  const int64_t m = state.range(0), heads = state.range(1), kv_heads = state.range(2), D = state.range(3);
  const int64_t context = 512, S = context + m, group = heads / kv_heads;
  at::set_num_threads(2);
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  at::Tensor q = torch::randn({m, heads, D});
  at::Tensor k = torch::randn({kv_heads, S, D}), v = torch::randn({kv_heads, S, D});
  at::Tensor out = torch::empty({m, heads, D});
  const dspark::kernels::AttentionShape a = shape_of(m, heads, kv_heads, D, context);
  for (auto _ : state) {
    if constexpr (impl == Impl::Kernel) {
      dspark::kernels::attention_f32(a, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), S * D,
                                     out.data_ptr<float>());
      benchmark::ClobberMemory();
    } else {
      at::Tensor qg = q.view({m, kv_heads, group, D}).permute({1, 2, 0, 3}).reshape({kv_heads, group * m, D});
      at::Tensor scores = (torch::matmul(qg, k.transpose(1, 2)) * a.scale).view({kv_heads, group, m, S});
      at::Tensor qpos = torch::arange(context, context + m).unsqueeze(1), kpos = torch::arange(S).unsqueeze(0);
      scores = scores.masked_fill((kpos <= qpos).logical_not(), -INFINITY);
      at::Tensor probs = torch::softmax(scores, -1);
      benchmark::DoNotOptimize(torch::matmul(probs.view({kv_heads, group * m, S}), v)
                                   .view({kv_heads, group, m, D}).permute({2, 0, 1, 3}).reshape({m, heads * D}));
    }
  }
  state.SetLabel(impl == Impl::Kernel ? "kernel" : "libtorch ops");
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (auto [h, kv, d] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 64}, {8, 4, 64}, {16, 8, 128}})
    for (int64_t m : {1, 4, 8, 16}) b->Args({m, h, kv, d});
  b->ArgNames({"m", "heads", "kv", "D"})->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Attention<Impl::Kernel>)->Name("Attention/kernel")->Apply(Shapes);
BENCHMARK(BM_Attention<Impl::Torch>)->Name("Attention/torch")->Apply(Shapes);

// Decoding reads each layer's keys/values from memory: between two forwards the target streams
// its weights (71 MB for the default model), which evicts the cache of every layer. Here each
// call takes the next cache of a pool larger than any last-level cache (256 MiB), so the time
// includes fetching keys and values from DRAM as a forward sees them (the benchmark above
// re-reads one cache that stays in L2/L3). Context 256, the bench prompts' typical length.
void BM_AttentionStream(benchmark::State& state) {
  const int64_t m = state.range(0), heads = state.range(1), kv_heads = state.range(2), D = state.range(3);
  const int64_t context = 256, S = context + m;
  const int64_t pool = std::max<int64_t>(2, (int64_t(256) << 20) / (2 * kv_heads * S * D * 4));
  at::set_num_threads(2);
  torch::manual_seed(0);
  at::Tensor q = torch::randn({m, heads, D});
  at::Tensor kv = torch::randn({pool, 2, kv_heads, S, D});
  at::Tensor out = torch::empty({m, heads, D});
  const dspark::kernels::AttentionShape a = shape_of(m, heads, kv_heads, D, context);
  int64_t next = 0;
  for (auto _ : state) {
    const float* k = kv.data_ptr<float>() + next * 2 * kv_heads * S * D;
    dspark::kernels::attention_f32(a, q.data_ptr<float>(), k, k + kv_heads * S * D, S * D, out.data_ptr<float>());
    benchmark::ClobberMemory();
    next = (next + 1) % pool;
  }
  state.SetBytesProcessed(state.iterations() * 2 * kv_heads * S * D * 4);
}
BENCHMARK(BM_AttentionStream)->Name("AttentionStream/kernel")->Apply(Shapes);

}  // namespace
