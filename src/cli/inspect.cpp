// dspark inspect: what a checkpoint directory (or a .safetensors file) holds.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <map>

#include "cli/command.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct InspectArgs {
  std::string path;
  bool json = false;
};

int run_inspect(const InspectArgs& args) {
  namespace fs = std::filesystem;
  if (!fs::exists(args.path)) fail("'{}' does not exist", args.path);
  io::TensorStore store = io::TensorStore::open(args.path);
  int64_t parameters = 0, bytes = 0;
  std::map<std::string, int64_t> by_dtype;
  std::map<std::string, int> files;
  for (const auto& [name, view] : store.tensors()) {
    parameters += view.numel();
    bytes += int64_t(view.nbytes);
    by_dtype[io::dtype_name(view.dtype)] += view.numel();
    files[fs::path(view.file).filename().string()]++;
  }
  nlohmann::json out = {{"path", args.path}, {"tensors", store.tensors().size()},
                        {"parameters", parameters}, {"bytes", bytes},
                        {"dtypes", by_dtype}, {"files", files}};
  const fs::path dir = fs::is_directory(args.path) ? fs::path(args.path) : fs::path(args.path).parent_path();
  if (fs::exists(dir / "config.json")) {
    ModelConfig c = load_model_config(dir.string());
    out["architecture"] = c.architecture_name;
    out["config"] = {{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                     {"intermediate_size", c.intermediate_size}, {"num_layers", c.num_layers},
                     {"num_heads", c.num_heads}, {"num_kv_heads", c.num_kv_heads},
                     {"head_dim", c.head_dim}, {"max_position_embeddings", c.max_position_embeddings},
                     {"tie_word_embeddings", c.tie_word_embeddings}, {"sliding_window", c.sliding_window},
                     {"torch_dtype", c.torch_dtype}};
    out["parameters_expected_from_config"] = c.parameter_count();
  }
  if (args.json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (out.contains("architecture")) {
    std::cout << fmt::format("architecture  {}\n", out["architecture"].get<std::string>());
    for (auto& [k, v] : out["config"].items()) std::cout << fmt::format("  {:<24} {}\n", k, v.dump());
  }
  std::cout << fmt::format("tensors       {}\nparameters    {} ({:.2f} M)\nbytes         {} ({:.2f} MB)\n",
                           store.tensors().size(), parameters, parameters / 1e6, bytes, bytes / 1e6);
  for (auto& [dtype, n] : by_dtype) std::cout << fmt::format("  {:<6} {} parameters\n", dtype, n);
  for (auto& [file, n] : files) std::cout << fmt::format("  {} ({} tensors)\n", file, n);
  return 0;
}

}  // namespace

Command add_inspect(CLI::App& root) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* app = root.add_subcommand("inspect", "show what a checkpoint directory holds");
  app->add_option("path", args->path, "checkpoint directory or .safetensors file")->required();
  app->add_flag("--json", args->json, "print JSON");
  return {app, [args] { return run_inspect(*args); }};
}

}  // namespace dspark::cli
