// dspark profile: the cost of one target forward over a chunk of T = 1..max tokens after a fixed
// context, i.e. target steps per second SPS(T). Verify-k vs verify-1 side by side in one run.
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "cli/command.h"
#include "cli/model_args.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct ProfileArgs {
  std::string model_dir;
  int64_t max_tokens = 16;
  int64_t context = 64;
  int64_t repeats = 5;
  bool json = false;
  RuntimeArgs runtime;
};

int run_profile(const ProfileArgs& args) {
  if (args.max_tokens < 1 || args.repeats < 1 || args.context < 1)
    fail("--max-tokens, --repeats and --context must be >= 1");
  args.runtime.apply();
  auto model = Transformer::load(args.model_dir, LoadOptions{args.runtime.dtype, args.runtime.device});
  const int64_t V = model->config().vocab_size;
  std::vector<int64_t> prefix(static_cast<size_t>(args.context));
  for (int64_t i = 0; i < args.context; ++i) prefix[size_t(i)] = (i * 7919 + 13) % V;
  KVCache cache = model->new_cache();
  model->forward(cache, prefix, LogitsAt::None);

  // Interleave the chunk sizes within each repeat so that machine noise hits them alike.
  std::vector<std::vector<double>> seconds(size_t(args.max_tokens));
  for (int64_t r = -1; r < args.repeats; ++r) {  // r = -1 warms up
    for (int64_t T = 1; T <= args.max_tokens; ++T) {
      std::vector<int64_t> chunk(static_cast<size_t>(T));
      for (int64_t i = 0; i < T; ++i) chunk[size_t(i)] = (r * 31 + i * 17 + 5 + V) % V;
      auto start = std::chrono::steady_clock::now();
      model->forward(cache, chunk, LogitsAt::All);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      cache.truncate(args.context);
      if (r >= 0) seconds[size_t(T - 1)].push_back(s);
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  double base = 0.0;
  for (int64_t T = 1; T <= args.max_tokens; ++T) {
    auto& v = seconds[size_t(T - 1)];
    std::sort(v.begin(), v.end());
    const double median = v[v.size() / 2];
    if (T == 1) base = median;
    rows.push_back({{"tokens", T}, {"ms", median * 1e3}, {"steps_per_second", 1.0 / median},
                    {"cost_vs_1", median / base}});
  }
  nlohmann::json out = {{"model", args.model_dir}, {"dtype", dtype_to_hf(model->dtype())},
                        {"threads", at::get_num_threads()}, {"context", args.context},
                        {"repeats", args.repeats}, {"rows", rows}};
  if (args.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << fmt::format("{} ({}, {} threads, context {})\n", args.model_dir, dtype_to_hf(model->dtype()),
                             at::get_num_threads(), args.context);
    std::cout << "  T        ms   steps/s  cost vs T=1\n";
    for (auto& row : rows)
      std::cout << fmt::format("{:>3} {:>9.2f} {:>9.1f} {:>12.2f}\n", row["tokens"].get<int64_t>(),
                               row["ms"].get<double>(), row["steps_per_second"].get<double>(),
                               row["cost_vs_1"].get<double>());
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
  args->runtime.add_to(app);
  return {app, [args] { return run_profile(*args); }};
}

}  // namespace dspark::cli
