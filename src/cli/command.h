// Each CLI command registers itself as a CLI11 subcommand with a small argument struct and a
// run function. main.cpp only wires them up and turns errors into one line + exit code 1.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dspark::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// Options shared by commands that run a model.
struct RuntimeArgs {
  int threads = 0;           // 0: all hardware threads
  std::string dtype;         // "" = as stored
  std::string device = "cpu";
  void add_to(CLI::App* app);
  void apply() const;        // checks --device, sets LibTorch's intra-op thread count
};

Command add_generate(CLI::App& root);
Command add_perplexity(CLI::App& root);
Command add_inspect(CLI::App& root);
Command add_init_random(CLI::App& root);
Command add_profile(CLI::App& root);
Command add_train_tokenizer(CLI::App& root);
Command add_train_lm(CLI::App& root);
Command add_regen(CLI::App& root);
Command add_train_drafter(CLI::App& root);
Command add_bench(CLI::App& root);
Command add_calibrate(CLI::App& root);
Command add_serve(CLI::App& root);
Command add_bench_serve(CLI::App& root);
Command add_convert(CLI::App& root);

}  // namespace dspark::cli
