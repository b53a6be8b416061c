// kernels/matmul against at::linear in float64 on the same inputs, for every ISA path this CPU has.
//
// Tolerance (matmul.h): with S = sum_p |x[i,p]| |w[j,p]| and u = 2^-24,
//   x holding bf16 values (all paths):         |y - exact| <= k u S     (products exact in f32,
//                                                                       only the f32 sums round)
//   Avx512Bf16 / Amx paths, arbitrary f32 x:      |y - exact| <= (2^-8 + k u) S   (x rounded to bf16)
// plus 1e-30 absolute slack for S == 0 and flushed denormals.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/matmul.h"

namespace {

using dspark::kernels::Isa;

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16, Isa::Amx})
    if (dspark::kernels::isa_supported(isa)) out.push_back(isa);
  return out;
}

struct Case {
  int64_t m, k, n;
  int64_t ldx_pad = 0, ldw_pad = 0, ldy_pad = 0;  // extra elements per row (strided operands)
};

// Runs one case on one path and checks every element against the float64 reference.
// bf16_x: x rounded to bf16 first (what a bf16 model feeds the kernel).
void check(Isa isa, bool bf16_weights, bool bf16_x, const Case& c, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t ldx = c.k + c.ldx_pad, ldw = c.k + c.ldw_pad, ldy = c.n + c.ldy_pad;
  at::Tensor xs = torch::randn({c.m, ldx});  // storage incl. padding columns
  at::Tensor ws = torch::randn({c.n, ldw});
  if (bf16_x) xs = xs.to(torch::kBFloat16).to(torch::kFloat32);
  at::Tensor ws_b = ws.to(torch::kBFloat16).contiguous();
  if (bf16_weights) ws = ws_b.to(torch::kFloat32);
  at::Tensor x = xs.narrow(1, 0, c.k), w = ws.narrow(1, 0, c.k);

  std::vector<float> y(size_t(c.m * ldy), std::nanf(""));
  if (bf16_weights) {
    dspark::kernels::matmul_bf16_with(isa, xs.data_ptr<float>(), ldx, c.m, c.k,
                                      reinterpret_cast<const uint16_t*>(ws_b.data_ptr()), ldw, c.n, y.data(), ldy);
  } else {
    dspark::kernels::matmul_f32_with(isa, xs.data_ptr<float>(), ldx, c.m, c.k, ws.data_ptr<float>(), ldw, c.n,
                                     y.data(), ldy);
  }

  at::Tensor x64 = x.to(torch::kFloat64), w64 = w.to(torch::kFloat64);
  at::Tensor ref = at::linear(x64, w64).contiguous();               // [m, n]
  at::Tensor scale = at::linear(x64.abs(), w64.abs()).contiguous();  // S, [m, n]
  const double u = std::ldexp(1.0, -24);
  const double rel = (!bf16_x && bf16_weights && (isa == Isa::Avx512Bf16 || isa == Isa::Amx) ? std::ldexp(1.0, -8) : 0.0) + c.k * u;
  auto r = ref.accessor<double, 2>();
  auto s = scale.accessor<double, 2>();
  int failures = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      const double got = y[size_t(i * ldy + j)], tol = rel * s[i][j] + 1e-30;
      if (!(std::abs(got - r[i][j]) <= tol) && failures++ < 5)
        ADD_FAILURE() << dspark::kernels::isa_name(isa) << (bf16_weights ? " bf16" : " f32") << " m=" << c.m
                      << " k=" << c.k << " n=" << c.n << " y[" << i << "," << j << "]=" << got
                      << " ref=" << r[i][j] << " tol=" << tol;
    }
  // Padding between output rows is left alone.
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < ldy; ++j) EXPECT_TRUE(std::isnan(y[size_t(i * ldy + j)]));
}

TEST(Matmul, ReportsPaths) {
  EXPECT_TRUE(dspark::kernels::isa_supported(Isa::Scalar));
  EXPECT_TRUE(dspark::kernels::isa_supported(dspark::kernels::best_isa()));
  for (Isa isa : supported_isas()) std::printf("[ matmul   ] path available: %s\n", dspark::kernels::isa_name(isa));
}

TEST(Matmul, AgreesWithFloat64AcrossShapesAndPaths) {
  uint64_t seed = 1;
  for (Isa isa : supported_isas())
    for (int64_t m = 1; m <= 17; ++m)
      for (int64_t k : {1, 7, 64, 100, 1027})
        for (int64_t n : {1, 15, 33, 257}) {
          check(isa, /*bf16_weights=*/true, /*bf16_x=*/true, {m, k, n}, seed++);
          check(isa, /*bf16_weights=*/false, /*bf16_x=*/false, {m, k, n}, seed++);
        }
}

// The AMX path takes k % 32 == 0 in whole tiles of 16 weight rows (the rest by Avx512Bf16): one
// and several 16-row blocks of x (the 2 x 2 tile kernel and its tails), every tile-count tail.
TEST(Matmul, AmxTileShapes) {
  if (!dspark::kernels::isa_supported(Isa::Amx)) GTEST_SKIP() << "no AMX on this CPU";
  uint64_t seed = 3000;
  for (int64_t m : {1, 2, 8, 15, 16, 17, 31, 32, 33, 48, 70})
    for (int64_t k : {32, 96, 1024})
      for (int64_t n : {16, 17, 48, 64, 65, 100, 129}) {
        check(Isa::Amx, /*bf16_weights=*/true, /*bf16_x=*/true, {m, k, n}, seed++);
        check(Isa::Amx, /*bf16_weights=*/true, /*bf16_x=*/false, {m, k, n}, seed++);
      }
  check(Isa::Amx, true, true, Case{20, 64, 40, 3, 32, 5}, seed++);  // strided
}

// Each output row is computed with the same instructions in the same order whatever m is:
// row i of a 1-row product equals row i of a 37-row product, bit for bit (row-invariant decoding).
TEST(Matmul, RowsDoNotDependOnOtherRows) {
  torch::manual_seed(11);
  const int64_t m = 37, k = 256, n = 200;
  at::Tensor x = torch::randn({m, k});
  at::Tensor w = torch::randn({n, k}).to(torch::kBFloat16).contiguous();
  const auto* wp = reinterpret_cast<const uint16_t*>(w.data_ptr());
  for (Isa isa : supported_isas()) {
    std::vector<float> all(size_t(m * n)), one(static_cast<size_t>(n));
    dspark::kernels::matmul_bf16_with(isa, x.data_ptr<float>(), k, m, k, wp, k, n, all.data(), n);
    for (int64_t i : {0, 5, 16, 36}) {
      dspark::kernels::matmul_bf16_with(isa, x.data_ptr<float>() + i * k, k, 1, k, wp, k, n, one.data(), n);
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + i * n, size_t(n) * sizeof(float)))
          << dspark::kernels::isa_name(isa) << " row " << i;
    }
  }
}

TEST(Matmul, Bf16PathRoundsArbitraryActivationsWithinBound) {
  uint64_t seed = 1000;
  for (Isa isa : supported_isas())
    for (int64_t m : {1, 5, 16})
      for (int64_t k : {31, 33, 1027})
        check(isa, /*bf16_weights=*/true, /*bf16_x=*/false, {m, k, 37}, seed++);
}

TEST(Matmul, StridedOperands) {
  uint64_t seed = 2000;
  for (Isa isa : supported_isas())
    for (const Case& c : {Case{3, 100, 33, 5, 3, 2}, Case{9, 64, 15, 1, 32, 7}, Case{16, 1027, 9, 13, 1, 1}}) {
      check(isa, true, true, c, seed++);
      check(isa, false, false, c, seed++);
    }
}

TEST(Matmul, EmptyReductionGivesZeros) {
  for (Isa isa : supported_isas()) {
    std::vector<float> y(6, 1.0f);
    dspark::kernels::matmul_f32_with(isa, nullptr, 0, 2, 0, nullptr, 0, 3, y.data(), 3);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

TEST(Matmul, MultiThreadedMatchesSingleThreaded) {
  // Large enough to be split across threads; each output is computed by one thread in the same
  // order either way, so results are bit-identical.
  torch::manual_seed(7);
  const int64_t m = 3, k = 512, n = 4099;
  at::Tensor x = torch::randn({m, k}).to(torch::kBFloat16).to(torch::kFloat32);
  at::Tensor w = torch::randn({n, k}).to(torch::kBFloat16).contiguous();
  const int threads = at::get_num_threads();
  std::vector<float> y1(size_t(m * n)), y2(size_t(m * n));
  at::set_num_threads(1);
  dspark::kernels::matmul_bf16(x.data_ptr<float>(), m, k, reinterpret_cast<const uint16_t*>(w.data_ptr()), n,
                               y1.data());
  at::set_num_threads(std::max(2, threads));
  dspark::kernels::matmul_bf16(x.data_ptr<float>(), m, k, reinterpret_cast<const uint16_t*>(w.data_ptr()), n,
                               y2.data());
  at::set_num_threads(threads);
  EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)));
}

}  // namespace
