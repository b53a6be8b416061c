#include "model/rope.h"

#include <torch/torch.h>

#include <cmath>

namespace dspark {

at::Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling) {
  auto exponents = torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / double(head_dim);
  at::Tensor inv_freq = 1.0 / torch::pow(torch::tensor(theta, torch::kFloat32), exponents);
  if (scaling.type == "linear") {
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
  at::Tensor c = cos.to(x.scalar_type()).unsqueeze(1);  // [N, 1, D]
  at::Tensor s = sin.to(x.scalar_type()).unsqueeze(1);
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  at::Tensor rotated = torch::cat({-x2, x1}, -1);
  return x * c + rotated * s;
}

}  // namespace dspark
