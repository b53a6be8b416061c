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
  dspark::kernels::AttentionShape a;
  a.tokens = m;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = D;
  a.keys = S;
  a.position0 = context;
  a.scale = float(1.0 / std::sqrt(double(D)));
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

}  // namespace
