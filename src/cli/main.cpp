// dspark: command-line entry point.
#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <malloc.h>

#include <iostream>
#include <thread>

#include "cli/command.h"
#include "cli/model_args.h"
#include "model/device.h"
#include "util/error.h"

namespace dspark::cli {

void RuntimeArgs::add_to(CLI::App* app) {
  app->add_option("-t,--threads", threads, "CPU threads for LibTorch (default: all cores)");
  app->add_option("--dtype", dtype, "compute dtype: f32, bf16, f16 or auto (default auto: on CPU float32 activations with bf16 matrices kept bf16; on GPU as stored)");
  app->add_option("--device", device, "cpu or cuda[:N]");
}

void RuntimeArgs::apply() const {
  parse_device(device);  // an unusable --device fails here, before anything is loaded
  const int n = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(n);
}

}  // namespace dspark::cli

namespace {

// LibTorch allocates and frees activations of a few MB on every step. With glibc's defaults
// blocks above the (dynamic) mmap threshold are mapped and zero-faulted each time and freed
// heap tops are trimmed back to the OS: measured ~20% of a training step in page faults. Keep
// blocks up to 32 MB (glibc's maximum) on the heap and keep the heap.
void keep_freed_memory_for_reuse() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_for_reuse();
  CLI::App app{"dspark: lossless speculative decoding with DSpark drafters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dspark 0.1.0");
  std::vector<dspark::cli::Command> commands = {
      dspark::cli::add_generate(app),
      dspark::cli::add_perplexity(app),
      dspark::cli::add_inspect(app),
      dspark::cli::add_init_random(app),
      dspark::cli::add_profile(app),
      dspark::cli::add_train_tokenizer(app),
      dspark::cli::add_train_lm(app),
      dspark::cli::add_regen(app),
      dspark::cli::add_train_drafter(app),
      dspark::cli::add_bench(app),
      dspark::cli::add_calibrate(app),
      dspark::cli::add_serve(app),
      dspark::cli::add_bench_serve(app),
      dspark::cli::add_convert(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const dspark::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const c10::Error& e) {
    std::cerr << "error: " << dspark::cli::one_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 1;
}
