// dspark convert: drafters between this engine's format and the Hugging Face layouts DeepSeek's
// DeepSpec and z-lab publish (docs/interop.md).
//   dspark convert --from deepspec|zlab-dflash SRC --target MODEL --out DIR
//   dspark convert --to deepspec SRC --target MODEL --out DIR
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "cli/model_args.h"
#include "drafter/deepspec_format.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct ConvertArgs {
  std::string from, to, src, target_dir, out_dir;
  std::string dtype = "auto";
  double max_shard_gb = 5.0;
};

// How the native drafter in `dir` stores its weights: bf16 when every weight is bf16 (d2t is ids).
c10::ScalarType stored_dtype(const std::string& dir) {
  const io::TensorStore store = io::TensorStore::open(dir, "drafter");
  for (const auto& [name, view] : store.tensors())
    if (view.dtype != io::DType::BF16 && view.dtype != io::DType::I64) return c10::kFloat;
  return c10::kBFloat16;
}

c10::ScalarType output_dtype(const std::string& name, c10::ScalarType source) {
  if (name == "auto") return source;
  if (name == "f32") return c10::kFloat;
  if (name == "bf16") return c10::kBFloat16;
  fail("--dtype must be auto, f32 or bf16, not '{}'", name);
}

int run_convert(const ConvertArgs& args) {
  namespace fs = std::filesystem;
  if (args.from.empty() == args.to.empty()) fail("give exactly one of --from LAYOUT and --to LAYOUT");
  if (!fs::is_directory(args.target_dir)) fail("target model directory '{}' does not exist", args.target_dir);
  if (fs::absolute(args.src).lexically_normal() == fs::absolute(args.out_dir).lexically_normal())
    fail("--out must differ from the source directory");
  auto target = Transformer::load(args.target_dir);
  if (!args.from.empty()) {
    const HfDrafterLayout layout = parse_hf_drafter_layout(args.from);
    HfDrafter read = read_hf_drafter(args.src, layout, *target);
    const c10::ScalarType dtype = output_dtype(args.dtype, read.dtype);
    read.drafter->save(args.out_dir, dtype);
    std::cout << fmt::format("{} drafter {} -> {} ({} parameters, {})\n", args.from, args.src, args.out_dir,
                             read.drafter->parameter_count(), dtype == c10::kBFloat16 ? "bf16" : "f32");
    return 0;
  }
  if (args.to != "deepspec") fail("--to supports deepspec only, not '{}'", args.to);
  auto drafter = DSparkDrafter::load(args.src, *target);
  const c10::ScalarType dtype = output_dtype(args.dtype, stored_dtype(args.src));
  if (args.max_shard_gb < 0) fail("--max-shard-gb must be >= 0");
  write_deepspec(*drafter, *target, args.target_dir, args.out_dir, dtype, size_t(args.max_shard_gb * 1e9));
  std::cout << fmt::format("drafter {} -> deepspec {} ({})\n", args.src, args.out_dir,
                           dtype == c10::kBFloat16 ? "bf16" : "f32");
  return 0;
}

}  // namespace

Command add_convert(CLI::App& root) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* app = root.add_subcommand("convert", "convert a drafter from / to DeepSpec's or z-lab's Hugging Face layout");
  app->add_option("--from", args->from, "read SRC in this layout: deepspec | zlab-dflash");
  app->add_option("--to", args->to, "write SRC (a native drafter) in this layout: deepspec");
  app->add_option("src", args->src, "source drafter directory")->required();
  app->add_option("--target", args->target_dir, "the target model directory")->required();
  app->add_option("--out", args->out_dir, "output directory")->required();
  app->add_option("--dtype", args->dtype, "output weights: auto (as the source stores them), f32 or bf16")
      ->capture_default_str();
  app->add_option("--max-shard-gb", args->max_shard_gb, "--to: shard the safetensors above this size (0: one file)")
      ->capture_default_str();
  return {app, [args] { return run_convert(*args); }};
}

}  // namespace dspark::cli
