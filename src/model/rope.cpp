#include "model/rope.h"

#include "model/ops.h"

#include <torch/torch.h>

#include <cmath>

namespace dspark {

at::Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling) {
  auto exponents = torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / double(head_dim);
  at::Tensor inv_freq = 1.0 / torch::pow(torch::tensor(theta, torch::kFloat32), exponents);
  if (scaling.type == "proportional") {
    // Gemma4's global layers: the first int(p * D / 2) frequencies as above (exponents over the
    // whole D), the rest 0 (cos 1, sin 0: those dims pass unrotated), all divided by factor.
    const int64_t rotated = int64_t(std::floor(scaling.partial_rotary_factor * double(head_dim) / 2.0));
    inv_freq.narrow(0, rotated, inv_freq.size(0) - rotated).zero_();
    inv_freq = inv_freq / scaling.factor;
  } else if (scaling.type == "linear") {
    inv_freq = inv_freq / scaling.factor;
  } else if (scaling.type == "llama3") {
    const double old_context = double(scaling.original_max_position_embeddings);
    const double low_freq_wavelen = old_context / scaling.low_freq_factor;
    const double high_freq_wavelen = old_context / scaling.high_freq_factor;
    auto acc = inv_freq.accessor<float, 1>();
    for (int64_t i = 0; i < inv_freq.size(0); ++i) {
      const double freq = acc[i];
      const double wavelen = 2.0 * M_PI / freq;
      double scaled = freq;
      if (wavelen > low_freq_wavelen) {
        scaled = freq / scaling.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth = (old_context / wavelen - scaling.low_freq_factor) /
                              (scaling.high_freq_factor - scaling.low_freq_factor);
        scaled = (1.0 - smooth) * freq / scaling.factor + smooth * freq;
      }
      acc[i] = float(scaled);
    }
  }
  return inv_freq;
}

std::pair<at::Tensor, at::Tensor> rope_tables(const at::Tensor& inv_freq, const at::Tensor& positions) {
  // [N, 1] * [1, D/2] -> [N, D/2] angles, duplicated to [N, D].
  at::Tensor angles = positions.to(torch::kFloat32).unsqueeze(1) * inv_freq.unsqueeze(0);
  at::Tensor full = torch::cat({angles, angles}, -1);
  return {full.cos(), full.sin()};
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  // Decoding on the CPU in float32: one pass over raw rows instead of ~10 LibTorch operators.
  const bool needs_grad = at::GradMode::is_enabled() && x.requires_grad();
  if (!needs_grad && cpu_fast_paths_enabled() && x.device().is_cpu() && x.dim() == 3 && x.scalar_type() == torch::kFloat32 &&
      cos.scalar_type() == torch::kFloat32 && sin.scalar_type() == torch::kFloat32 && cos.dim() == 2 &&
      cos.size(0) == x.size(0) && cos.size(1) == x.size(2) && sin.sizes() == cos.sizes() && (x.size(0) <= 64 || row_invariant_active()) &&
      x.size(2) % 2 == 0) {
    const at::Tensor xc = x.contiguous(), cc = cos.contiguous(), sc = sin.contiguous();
    at::Tensor y = torch::empty_like(xc);
    const int64_t N = x.size(0), H = x.size(1), D = x.size(2);
    for (int64_t t = 0; t < N; ++t) {
      const float* c = cc.data_ptr<float>() + t * D;
      const float* s = sc.data_ptr<float>() + t * D;
      for (int64_t h = 0; h < H; ++h) {
        const float* in = xc.data_ptr<float>() + (t * H + h) * D;
        float* out = y.data_ptr<float>() + (t * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {  // rotate_half: [-x2, x1]
          out[i] = in[i] * c[i] - in[i + half] * s[i];
          out[i + half] = in[i + half] * c[i + half] + in[i] * s[i + half];
        }
      }
    }
    return y;
  }
  at::Tensor c = cos.to(x.scalar_type()).unsqueeze(1);  // [N, 1, D]
  at::Tensor s = sin.to(x.scalar_type()).unsqueeze(1);
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  at::Tensor rotated = torch::cat({-x2, x1}, -1);
  return x * c + rotated * s;
}

}  // namespace dspark
