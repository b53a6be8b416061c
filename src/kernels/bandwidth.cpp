#include "kernels/bandwidth.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "kernels/avx512_sum.h"
#include "kernels/parallel.h"

namespace dspark::kernels {
namespace {

// Four independent accumulators keep several loads in flight; the sums are returned so the
// compiler cannot drop the reads.
__attribute__((target("avx512f"))) float sum_avx512(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  float s = avx512_sum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((target("avx2"))) float sum_avx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : lanes) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}

float sum_scalar(const float* p, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  return s;
}

volatile float sink;

}  // namespace

BandwidthResult measure_read_bandwidth(int64_t bytes, int repeats) {
  const int64_t n = std::max<int64_t>(bytes / int64_t(sizeof(float)), 1024);
  std::unique_ptr<float[]> buffer(new float[size_t(n)]);  // uninitialised: touched below
  float* data = buffer.get();
  // Blocks of 64 KiB floats, so each thread reads what it first touched (its own NUMA node).
  constexpr int64_t kBlock = 16384;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_ranges(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::fill(data + b0 * kBlock, data + std::min(n, b1 * kBlock), 1.0f);
  });
  auto sum = __builtin_cpu_supports("avx512f") ? sum_avx512 : __builtin_cpu_supports("avx2") ? sum_avx2 : sum_scalar;
  BandwidthResult result;
  result.bytes = n * int64_t(sizeof(float));
  result.threads = at::get_num_threads();
  std::vector<float> block_sums(static_cast<size_t>(blocks));
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    const auto start = std::chrono::steady_clock::now();
    parallel_ranges(blocks, 1, [&](int64_t b0, int64_t b1) {
      block_sums[size_t(b0)] = sum(data + b0 * kBlock, std::min(n, b1 * kBlock) - b0 * kBlock);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    sink = block_sums[0];  // keeps the sums live
    result.bytes_per_second = std::max(result.bytes_per_second, double(result.bytes) / seconds);
  }
  return result;
}

}  // namespace dspark::kernels
