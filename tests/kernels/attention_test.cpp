// kernels/attention against the same attention written with LibTorch operators.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/attention.h"

namespace dspark::kernels {
namespace {

// q [T, nh, D], k/v [nkv, S, D] -> [T, nh, D].
at::Tensor reference(const AttentionShape& a, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t group = a.heads / a.kv_heads;
  at::Tensor kk = k.repeat_interleave(group, 0), vv = v.repeat_interleave(group, 0);  // [nh, S, D]
  at::Tensor scores = torch::matmul(q.transpose(0, 1), kk.transpose(1, 2)) * a.scale;   // [nh, T, S]
  if (a.softcap > 0) scores = torch::tanh(scores / a.softcap) * a.softcap;
  at::Tensor qpos = torch::arange(a.position0, a.position0 + a.tokens).unsqueeze(1);
  at::Tensor kpos = torch::arange(a.keys).unsqueeze(0);
  at::Tensor allowed = kpos <= qpos;
  if (a.window > 0) allowed = allowed & (kpos > qpos - a.window);
  scores = scores.masked_fill(allowed.logical_not(), -INFINITY);
  return torch::matmul(torch::softmax(scores, -1), vv).transpose(0, 1).contiguous();
}

// Every ISA path this CPU has (the default, best_isa(), is one of them).
std::vector<Isa> paths() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

TEST(AttentionKernel, MatchesLibTorchOverShapes) {
  for (Isa isa : paths()) {
    torch::manual_seed(0);
    struct Case {
      int64_t T, nh, nkv, D, position0, window;
      float softcap;
    };
    const Case cases[] = {{1, 1, 1, 1, 0, 0, 0},     {1, 4, 2, 64, 63, 0, 0},   {7, 4, 2, 64, 100, 0, 0},
                          {8, 16, 8, 128, 5, 0, 0},  {3, 6, 3, 33, 17, 4, 0},   {16, 8, 1, 64, 40, 0, 50.0f},
                          {5, 2, 2, 7, 0, 3, 20.0f}, {64, 4, 4, 16, 2, 0, 0},  {4, 4, 2, 24, 30, 0, 0},
                          {9, 2, 1, 256, 20, 0, 0},  {3, 2, 1, 40, 50, 11, 0}};
    for (const Case& c : cases) {
      AttentionShape a;
      a.tokens = c.T;
      a.heads = c.nh;
      a.kv_heads = c.nkv;
      a.head_dim = c.D;
      a.position0 = c.position0;
      a.keys = c.position0 + c.T;
      a.window = c.window;
      a.scale = 1.0f / std::sqrt(float(c.D));
      a.softcap = c.softcap;
      at::Tensor q = torch::randn({c.T, c.nh, c.D});
      // Keys/values inside a larger buffer, as in the KV cache: [nkv, capacity, D].
      const int64_t capacity = a.keys + 9;
      at::Tensor kbuf = torch::randn({c.nkv, capacity, c.D}), vbuf = torch::randn({c.nkv, capacity, c.D});
      at::Tensor out = torch::empty({c.T, c.nh, c.D});
      attention_f32_with(isa, a, q.data_ptr<float>(), kbuf.data_ptr<float>(), vbuf.data_ptr<float>(), capacity * c.D,
                         out.data_ptr<float>());
      at::Tensor ref = reference(a, q, kbuf.narrow(1, 0, a.keys), vbuf.narrow(1, 0, a.keys));
      EXPECT_TRUE(torch::allclose(out, ref, 1e-4, 1e-5))
          << isa_name(isa) << ": T " << c.T << " heads " << c.nh << "/" << c.nkv << " D " << c.D << " max diff "
          << (out - ref).abs().max().item<double>();
    }
  }
}

// Verification scores k drafts in one forward; each row must equal what a one-token step at its
// position computes, bit for bit (every path).
TEST(AttentionKernel, ARowMatchesItsOneTokenStep) {
  for (Isa isa : paths()) {
    torch::manual_seed(2);
    // 3 heads per kv head: a row tile mixes the heads of neighbouring tokens differently in a
    // one-token step and in a step of 8.
    for (auto [heads, kv_heads, D] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 64}, {4, 2, 128}, {4, 2, 33}, {4, 2, 24},
                                      {3, 1, 64}}) {
      AttentionShape a;
      a.tokens = 8;
      a.heads = heads;
      a.kv_heads = kv_heads;
      a.head_dim = D;
      a.position0 = 45;
      a.keys = a.position0 + a.tokens;
      a.scale = 1.0f / std::sqrt(float(D));
      const int64_t capacity = a.keys + 3;
      at::Tensor q = torch::randn({a.tokens, a.heads, D});
      at::Tensor k = torch::randn({a.kv_heads, capacity, D}), v = torch::randn({a.kv_heads, capacity, D});
      at::Tensor all = torch::empty({a.tokens, a.heads, D});
      attention_f32_with(isa, a, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), capacity * D,
                         all.data_ptr<float>());
      for (int64_t t = 0; t < a.tokens; ++t) {
        AttentionShape one = a;
        one.tokens = 1;
        one.position0 = a.position0 + t;
        one.keys = one.position0 + 1;
        at::Tensor qt = q[t].contiguous(), ot = torch::empty({1, a.heads, D});
        attention_f32_with(isa, one, qt.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), capacity * D,
                           ot.data_ptr<float>());
        EXPECT_TRUE(torch::equal(ot[0], all[t])) << isa_name(isa) << ": D " << D << " row " << t;
      }
    }
  }
}

}  // namespace
}  // namespace dspark::kernels
