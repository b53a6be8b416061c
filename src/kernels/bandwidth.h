// A STREAM-like read probe: the rate at which this machine streams a buffer far larger than its
// caches, with the same threads the kernels use. Decoding reads every weight once per forward, so
// this rate bounds decode speed: tokens/s <= bandwidth / bytes of weights read per token.
#pragma once

#include <cstdint>

namespace dspark::kernels {

struct BandwidthResult {
  double bytes_per_second = 0;  // best of the repeats
  int64_t bytes = 0;            // buffer size
  int threads = 0;
};

// Sums a float buffer of `bytes` (first touched by the same threads that read it) `repeats`
// times; returns the best rate. Uses AVX-512 or AVX2 loads where the CPU has them.
BandwidthResult measure_read_bandwidth(int64_t bytes = int64_t(1) << 30, int repeats = 5);

}  // namespace dspark::kernels
