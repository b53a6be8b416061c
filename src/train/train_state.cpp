#include "train/train_state.h"

#include <torch/torch.h>
#include <torch/version.h>

#include "io/safetensors.h"
#include "util/error.h"

namespace dspark {
namespace {

// The optimizer's per-parameter state is keyed by the parameter's TensorImpl: as a string in
// LibTorch 1.x, as the pointer itself in 2.x.
#if TORCH_VERSION_MAJOR >= 2
void* state_key(const at::Tensor& p) { return p.unsafeGetTensorImpl(); }
#else
std::string state_key(const at::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }
#endif

at::Tensor view_f32(const io::TensorView& view, const at::Tensor& like, const std::string& path) {
  if (view.dtype != io::DType::F32) fail("{}: tensor {} is not F32", path, view.name);
  if (view.shape != like.sizes().vec()) fail("{}: tensor {} has another shape than the model's", path, view.name);
  return torch::from_blob(const_cast<void*>(view.data), view.shape, torch::kFloat32);
}

}  // namespace

void save_train_state(const std::string& path, const NamedParameters& params, torch::optim::Optimizer& optimizer,
                      const nlohmann::json& state) {
  std::vector<at::Tensor> keep;
  std::vector<io::TensorToWrite> out;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    at::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    keep.push_back(c);
    out.push_back({name, io::DType::F32, c.sizes().vec(), c.data_ptr(), size_t(c.nbytes())});
  };
  nlohmann::json adam_steps = nlohmann::json::object();
  for (const auto& [name, p] : params) {
    add("param." + name, p);
    auto it = optimizer.state().find(state_key(p));
    if (it == optimizer.state().end()) continue;  // no step taken yet
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    add("adam.exp_avg." + name, s.exp_avg());
    add("adam.exp_avg_sq." + name, s.exp_avg_sq());
    adam_steps[name] = s.step();
  }
  nlohmann::json meta = state;
  meta["adam_steps"] = adam_steps;
  io::write_safetensors(path, out, {{"state", meta.dump()}});
}

nlohmann::json load_train_state(const std::string& path, const NamedParameters& params,
                                torch::optim::Optimizer& optimizer) {
  const io::SafetensorsFile file = io::SafetensorsFile::open(path);
  const auto meta_it = file.metadata().find("state");
  if (meta_it == file.metadata().end()) fail("{}: not a training checkpoint (no state metadata)", path);
  nlohmann::json meta = nlohmann::json::parse(meta_it->second, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) fail("{}: corrupt state metadata", path);
  auto find = [&](const std::string& name) -> const io::TensorView* {
    auto it = file.tensors().find(name);
    return it == file.tensors().end() ? nullptr : &it->second;
  };
  const nlohmann::json adam_steps = meta.value("adam_steps", nlohmann::json::object());
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    const io::TensorView* v = find("param." + name);
    if (!v) fail("{}: missing parameter {}", path, name);
    p.detach().copy_(view_f32(*v, p, path));
    const io::TensorView* m = find("adam.exp_avg." + name);
    const io::TensorView* s = find("adam.exp_avg_sq." + name);
    if (!m || !s || !adam_steps.contains(name)) {
      optimizer.state().erase(state_key(p));
      continue;
    }
    auto st = std::make_unique<torch::optim::AdamWParamState>();
    st->step(adam_steps[name].get<int64_t>());
    st->exp_avg(view_f32(*m, p, path).to(p.device(), p.scalar_type()).clone());
    st->exp_avg_sq(view_f32(*s, p, path).to(p.device(), p.scalar_type()).clone());
    optimizer.state()[state_key(p)] = std::move(st);
  }
  meta.erase("adam_steps");
  return meta;
}

}  // namespace dspark
