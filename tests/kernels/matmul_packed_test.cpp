// kernels/matmul_packed against at::linear in float64, and model/packed_weights' registry.
//
// Tolerance as for the Avx512Bf16 row-major path (matmul_test.cpp): x holding bf16 values, the
// products are exact in f32 and only the f32 sums round: |y - exact| <= k u S, S = sum |x||w|.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"
#include "model/packed_weights.h"

namespace {

namespace k = dspark::kernels;

const uint16_t* bits(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr()); }

// The packed paths this CPU has (AVX512-BF16, AVX-512F widening, AVX2 + FMA; an AVX512-BF16 CPU
// tests all three).
std::vector<k::Isa> packed_paths() {
  std::vector<k::Isa> paths;
  for (k::Isa isa : {k::Isa::Avx512Bf16, k::Isa::Avx512, k::Isa::Avx2})
    if (k::isa_supported(isa)) paths.push_back(isa);
  return paths;
}

// Runs y = x w^T through the packed kernel's path `isa`; x [m, k] f32 holding bf16 values, w [n, k]
// bf16. `streamed`: the prefetching variant of the kernel (PackedBf16::streamed), same arithmetic.
std::vector<float> run_packed(k::Isa isa, const at::Tensor& x, const at::Tensor& w, int64_t ldy_pad = 0,
                              bool streamed = false) {
  const int64_t m = x.size(0), n = w.size(0);
  k::PackedBf16 packed = k::pack_bf16(bits(w), w.stride(0), n, w.size(1));
  packed.streamed = streamed;
  std::vector<float> y(size_t(m * (n + ldy_pad)), std::nanf(""));
  k::matmul_bf16_packed_with(isa, x.data_ptr<float>(), x.stride(0), m, packed, y.data(), n + ldy_pad);
  return y;
}

TEST(MatmulPacked, MatchesFloat64ReferenceForOddShapes) {
  if (!k::packed_bf16_supported()) GTEST_SKIP() << "CPU lacks AVX2 + FMA";
  // n: below one panel, one panel, a partial group of panels, several groups with a tail.
  // k: odd (a padding column), below one pair, and larger than the unrolled step.
  for (k::Isa isa : packed_paths()) {
    for (int64_t n : {1, 15, 16, 17, 33, 64, 100, 257})
      for (int64_t kk : {1, 2, 7, 31, 64, 129})
        for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 16, 17}) {
          torch::manual_seed(n * 1000 + kk * 10 + m);
          at::Tensor x = torch::randn({m, kk}).to(torch::kBFloat16).to(torch::kFloat32);
          at::Tensor w = torch::randn({n, kk}).to(torch::kBFloat16).contiguous();
          const int64_t pad = (n % 2) ? 3 : 0;
          std::vector<float> y = run_packed(isa, x, w, pad);
          at::Tensor x64 = x.to(torch::kFloat64), w64 = w.to(torch::kFloat64);
          at::Tensor ref = at::linear(x64, w64).contiguous(), scale = at::linear(x64.abs(), w64.abs()).contiguous();
          auto r = ref.accessor<double, 2>();
          auto s = scale.accessor<double, 2>();
          const double tol_rel = kk * std::ldexp(1.0, -24);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              const double got = y[size_t(i * (n + pad) + j)];
              ASSERT_LE(std::abs(got - r[i][j]), tol_rel * s[i][j] + 1e-30)
                  << k::isa_name(isa) << " m=" << m << " k=" << kk << " n=" << n << " at [" << i << "," << j << "]";
            }
          // Padding columns of y are never written.
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = n; j < n + pad; ++j) ASSERT_TRUE(std::isnan(y[size_t(i * (n + pad) + j)]));
          // The prefetching variant computes the same bits (NaN padding compared by representation).
          const std::vector<float> streamed = run_packed(isa, x, w, pad, true);
          ASSERT_EQ(std::memcmp(streamed.data(), y.data(), y.size() * sizeof(float)), 0)
              << k::isa_name(isa) << " m=" << m << " k=" << kk << " n=" << n;
        }
  }
}

TEST(MatmulPacked, StridedWeightsAndInputs) {
  if (!k::packed_bf16_supported()) GTEST_SKIP() << "CPU lacks AVX2 + FMA";
  torch::manual_seed(7);
  at::Tensor xs = torch::randn({5, 80}).to(torch::kBFloat16).to(torch::kFloat32);
  at::Tensor ws = torch::randn({40, 72}).to(torch::kBFloat16).contiguous();
  at::Tensor x = xs.narrow(1, 0, 64), w = ws.narrow(1, 0, 64);
  at::Tensor ref = at::linear(x.to(torch::kFloat64), w.to(torch::kFloat64)).contiguous();
  for (k::Isa isa : packed_paths()) {
    std::vector<float> y = run_packed(isa, x, w);
    at::Tensor got = torch::from_blob(y.data(), {5, 40}, torch::kFloat32).to(torch::kFloat64);
    EXPECT_LE((got - ref).abs().max().item<double>(), 1e-4) << k::isa_name(isa);
  }
}

// The AVX-512F widening kernel is the AVX2 kernel's fma chain with 16 lanes: identical bits, so a
// process that picks either (kernels::packed_bf16_isa) decodes the same tokens. Odd k, a partial
// panel, every pass size, the prefetching variant.
TEST(MatmulPacked, WideningPathsAgreeBitForBit) {
  if (!k::isa_supported(k::Isa::Avx512) || !k::isa_supported(k::Isa::Avx2)) GTEST_SKIP() << "CPU lacks AVX-512F";
  torch::manual_seed(5);
  const int64_t n = 150, kk = 97;
  at::Tensor w = torch::randn({n, kk}).to(torch::kBFloat16).contiguous();
  for (int64_t m : {1, 3, 4, 5, 8, 11, 16}) {
    at::Tensor x = torch::randn({m, kk});
    for (bool streamed : {false, true})
      EXPECT_EQ(run_packed(k::Isa::Avx512, x, w, 0, streamed), run_packed(k::Isa::Avx2, x, w, 0, streamed))
          << "m=" << m << " streamed=" << streamed;
  }
}

// A row's result must not depend on the other rows of the batch (verification of k drafts
// must score each position exactly as a one-token step would).
TEST(MatmulPacked, RowsAreBitIdenticalWhateverTheBatch) {
  if (!k::packed_bf16_supported()) GTEST_SKIP() << "CPU lacks AVX2 + FMA";
  torch::manual_seed(3);
  const int64_t n = 200, kk = 96;
  at::Tensor x = torch::randn({17, kk});  // arbitrary f32: rounding to bf16 happens inside
  at::Tensor w = torch::randn({n, kk}).to(torch::kBFloat16).contiguous();
  for (k::Isa isa : packed_paths()) {
    std::vector<float> all = run_packed(isa, x, w);
    for (int64_t m : {1, 2, 3, 4, 5, 8, 9})
      for (int64_t start = 0; start + m <= 17; start += 4) {
        std::vector<float> part = run_packed(isa, x.narrow(0, start, m), w);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            ASSERT_EQ(part[size_t(i * n + j)], all[size_t((start + i) * n + j)])
                << k::isa_name(isa) << " m=" << m << " row " << start + i;
      }
  }
}

TEST(MatmulPacked, RejectsTooNarrowStrides) {
  if (!k::packed_bf16_supported()) GTEST_SKIP() << "CPU lacks AVX2 + FMA";
  at::Tensor w = torch::randn({4, 8}).to(torch::kBFloat16).contiguous();
  const k::PackedBf16 packed = k::pack_bf16(bits(w), 8, 4, 8);
  std::vector<float> x(16, 1.0f), y(16);
  EXPECT_THROW(k::matmul_bf16_packed(x.data(), 4, 1, packed, y.data(), 4), std::invalid_argument);
  EXPECT_THROW(k::matmul_bf16_packed(x.data(), 8, 1, packed, y.data(), 2), std::invalid_argument);
  // A path the packed kernel does not have.
  EXPECT_THROW(k::matmul_bf16_packed_with(k::Isa::Scalar, x.data(), 8, 1, packed, y.data(), 4), std::invalid_argument);
}

TEST(PackedWeights, RegistersQualifyingMatricesWhileAlive) {
  if (!dspark::packed_weights_enabled()) GTEST_SKIP() << "packing is off on this CPU or by environment";
  at::Tensor bf = torch::randn({32, 16}).to(torch::kBFloat16).contiguous();
  at::Tensor f32 = torch::randn({32, 16});
  at::Tensor vec = torch::randn({16}).to(torch::kBFloat16);
  {
    dspark::PackedWeights packed({bf, f32, vec});
    EXPECT_EQ(packed.count(), 1);
    ASSERT_NE(dspark::find_packed(bf), nullptr);
    EXPECT_EQ(dspark::find_packed(bf)->n, 32);
    EXPECT_EQ(dspark::find_packed(f32), nullptr);
    EXPECT_EQ(dspark::find_packed(vec), nullptr);
    dspark::PackedWeights moved = std::move(packed);
    EXPECT_NE(dspark::find_packed(bf), nullptr);
  }
  EXPECT_EQ(dspark::find_packed(bf), nullptr);  // gone with its owner
}

TEST(PackedWeights, MatrixChangedInPlaceIsNoLongerPacked) {
  if (!dspark::packed_weights_enabled()) GTEST_SKIP() << "packing is off on this CPU or by environment";
  at::Tensor w = torch::randn({32, 16}).to(torch::kBFloat16).contiguous();
  dspark::PackedWeights packed({w});
  ASSERT_NE(dspark::find_packed(w), nullptr);
  w.mul_(2);  // bumps the version counter: the packed copy is stale
  EXPECT_EQ(dspark::find_packed(w), nullptr);
  // A view with another shape at the same address is not the packed matrix either.
  at::Tensor w2 = torch::randn({32, 16}).to(torch::kBFloat16).contiguous();
  dspark::PackedWeights packed2({w2});
  EXPECT_EQ(dspark::find_packed(w2.view({16, 32})), nullptr);
}

}  // namespace
