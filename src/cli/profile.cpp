// dspark profile: the cost of one target forward over a chunk of T = 1..max tokens after a fixed
// context, i.e. target steps per second SPS(T). Verify-k vs verify-1 side by side in one run.
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "cli/command.h"
#include "cli/model_args.h"
#include "spec/scheduler.h"
#include "util/error.h"
#include <filesystem>

namespace dspark::cli {
namespace {

struct ProfileArgs {
  std::string model_dir;
  int64_t max_tokens = 16;
  int64_t context = 64;
  int64_t repeats = 5;
  bool json = false;
  std::string out;
  bool no_save = false;
  RuntimeArgs runtime;
};

int run_profile(const ProfileArgs& args) {
  args.runtime.apply();
  auto model = Transformer::load(args.model_dir, LoadOptions{args.runtime.dtype, args.runtime.device});
  const SpsProfile p = measure_sps(*model, args.max_tokens, args.context, args.repeats);
  // Saved next to the model (or --out), where generate --verify auto finds it.
  const std::string out = args.out.empty() ? (std::filesystem::path(args.model_dir) / "sps_profile.json").string() : args.out;
  if (!args.no_save) save_sps_profile(out, p);
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < p.steps_per_second.size(); ++i)
    rows.push_back({{"tokens", i + 1}, {"ms", 1e3 / p.steps_per_second[i]}, {"steps_per_second", p.steps_per_second[i]},
                    {"cost_vs_1", p.steps_per_second[0] / p.steps_per_second[i]}});
  nlohmann::json j = {{"model", args.model_dir}, {"dtype", p.dtype}, {"threads", p.threads}, {"context", args.context},
                      {"repeats", args.repeats}, {"rows", rows}, {"saved", args.no_save ? "" : out}};
  if (args.json) {
    std::cout << j.dump() << "\n";
  } else {
    std::cout << fmt::format("{} ({}, {} threads, context {})\n", args.model_dir, p.dtype, p.threads, args.context);
    std::cout << "  T        ms   steps/s  cost vs T=1\n";
    for (auto& row : rows)
      std::cout << fmt::format("{:>3} {:>9.2f} {:>9.1f} {:>12.2f}\n", row["tokens"].get<int64_t>(),
                               row["ms"].get<double>(), row["steps_per_second"].get<double>(),
                               row["cost_vs_1"].get<double>());
    if (!args.no_save) std::cout << "saved " << out << "\n";
  }
  return 0;
}

}  // namespace

Command add_profile(CLI::App& root) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* app = root.add_subcommand("profile", "measure target steps/s for chunks of 1..N tokens");
  app->add_option("-m,--model", args->model_dir, "model directory")->required();
  app->add_option("--max-tokens", args->max_tokens, "largest chunk to measure");
  app->add_option("--context", args->context, "tokens already in the KV cache");
  app->add_option("--repeats", args->repeats, "measurements per chunk size (median reported)");
  app->add_flag("--json", args->json, "print JSON");
  app->add_option("--out", args->out, "where to save the profile (default MODEL/sps_profile.json)");
  app->add_flag("--no-save", args->no_save, "only print");
  args->runtime.add_to(app);
  return {app, [args] { return run_profile(*args); }};
}

}  // namespace dspark::cli
