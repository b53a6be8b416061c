#include "model/bf16_training_linear.h"

#include <torch/torch.h>

#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"

namespace dspark {
namespace {

const uint16_t* bf16_data(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr()); }

struct Bf16Linear : public torch::autograd::Function<Bf16Linear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    const int64_t n = w.size(0), k = w.size(1);
    at::Tensor x2 = x.reshape({-1, k}).contiguous();                   // [M, K] float32
    at::Tensor w_bf16 = w.detach().to(torch::kBFloat16).contiguous();  // [N, K]
    const int64_t m = x2.size(0);
    ctx->save_for_backward({x2, w_bf16});
    at::Tensor y = torch::empty({m, n}, x2.options());  // [M, N]
    kernels::matmul_bf16_amx(x2.data_ptr<float>(), k, m, k, bf16_data(w_bf16), k, n, y.data_ptr<float>(), n);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = n;
    return y.view(shape);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x2 = saved[0];      // [M, K] float32
    const at::Tensor& w_bf16 = saved[1];  // [N, K] bf16
    const int64_t n = w_bf16.size(0), k = w_bf16.size(1), m = x2.size(0);
    at::Tensor dy = grads[0].reshape({m, n}).contiguous();  // [M, N] float32
    // dx [M, K] = dy [M, N] w [N, K]: the weight operand is w^T [K, N].
    at::Tensor w_t = w_bf16.t().contiguous();  // [K, N] bf16
    at::Tensor dx = torch::empty({m, k}, x2.options());
    kernels::matmul_bf16_amx(dy.data_ptr<float>(), n, m, n, bf16_data(w_t), n, k, dx.data_ptr<float>(), k);
    // dw [N, K] = dy^T [N, M] x [M, K]: dy read through its transpose, the weight operand x^T [K, M].
    at::Tensor x_t = x2.to(torch::kBFloat16).t().contiguous();  // [K, M] bf16
    at::Tensor dw = torch::empty({n, k}, x2.options());
    kernels::matmul_bf16_amx_xt(dy.data_ptr<float>(), n, n, m, bf16_data(x_t), m, k, dw.data_ptr<float>(), k);
    std::vector<int64_t> shape = grads[0].sizes().vec();
    shape.back() = k;
    return {dx.view(shape), dw};
  }
};

}  // namespace

bool bf16_training_linear_available() { return kernels::isa_supported(kernels::Isa::Amx); }

bool bf16_training_linear_fits(int64_t rows, int64_t k, int64_t n) { return rows % 32 == 0 && k % 32 == 0 && n % 32 == 0; }

at::Tensor bf16_training_linear(const at::Tensor& x, const at::Tensor& w) { return Bf16Linear::apply(x, w); }

}  // namespace dspark
