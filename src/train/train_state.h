// A training checkpoint in one safetensors file, written atomically: every parameter in float32
// ("param.NAME"), the AdamW moments ("adam.exp_avg.NAME", "adam.exp_avg_sq.NAME") and a JSON
// metadata entry "state" holding the step, the optimizer step count, the data position and
// whatever the trainer needs to check that a resumed run is the same run. Restoring it gives
// bit-identical continuation (same thread count, same machine).
#pragma once
#include <ATen/Tensor.h>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace torch::optim { class Optimizer; }

namespace dspark {

using NamedParameters = std::vector<std::pair<std::string, at::Tensor>>;

// `optimizer` must be a torch::optim::AdamW over exactly `params`.
void save_train_state(const std::string& path, const NamedParameters& params, torch::optim::Optimizer& optimizer,
                      const nlohmann::json& state);

// Copies parameters and optimizer moments back in place and returns the "state" JSON. Throws
// dspark::Error when the file is malformed or a parameter is missing or has another shape.
nlohmann::json load_train_state(const std::string& path, const NamedParameters& params,
                                torch::optim::Optimizer& optimizer);

}  // namespace dspark
