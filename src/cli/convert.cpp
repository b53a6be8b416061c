// dspark convert: drafters between this engine's format and the Hugging Face layouts DeepSeek's
// DeepSpec and z-lab publish (docs/interop.md).
//   dspark convert --from deepspec|zlab-dflash SRC --target MODEL --out DIR
//   dspark convert --to deepspec SRC --target MODEL --out DIR
//   dspark convert --draft-vocab N (--data REGEN | --token-counts FILE) SRC --target MODEL --out DIR
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "cli/model_args.h"
#include "drafter/deepspec_format.h"
#include "drafter/draft_vocab.h"
#include "io/safetensors.h"
#include "train/drafter_trainer.h"
#include "train/regen.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct ConvertArgs {
  std::string from, to, src, target_dir, out_dir;
  std::string dtype = "auto";
  double max_shard_gb = 5.0;
  int64_t draft_vocab = 0;    // > 0: reduce a native drafter to this many tokens
  std::string data_dir;       // ... the most frequent of this regenerated data's responses
  std::string counts_path;    // ... or of these counts (token_counts.json)
  int64_t max_len = 256;      // tokens per sequence counted, as `dspark train --max-len`
  int64_t eval_samples = 32;  // held-out sequences not counted, as `dspark train`
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

// Token counts [vocab] from `--data` (as `dspark train --draft-vocab` counts them) or `--token-counts`.
std::vector<int64_t> token_counts(const ConvertArgs& args, int64_t vocab) {
  if (args.data_dir.empty() == args.counts_path.empty()) fail("--draft-vocab needs exactly one of --data and --token-counts");
  if (args.counts_path.empty()) {
    std::vector<RegenSample> samples = read_regen_samples(args.data_dir);
    samples.resize(samples.size() - size_t(held_out_samples(int64_t(samples.size()), args.eval_samples)));
    return label_token_counts(samples, vocab, args.max_len);
  }
  return read_token_counts(args.counts_path, vocab);
}

// A native whole-vocabulary drafter cut to its N most frequent tokens (docs/drafter.md). The
// counts go beside it (token_counts.json), so the same cut can be made again without the data.
int run_reduce(const ConvertArgs& args, Transformer& target) {
  auto drafter = DSparkDrafter::load(args.src, target);
  const int64_t vocab = target.config().vocab_size;
  const std::vector<int64_t> counts = token_counts(args, vocab);
  const at::Tensor d2t = most_frequent_tokens(counts, args.draft_vocab);
  auto reduced = drafter->with_draft_vocab(target, d2t);
  const c10::ScalarType dtype = output_dtype(args.dtype, stored_dtype(args.src));
  reduced->save(args.out_dir, dtype);
  write_token_counts((std::filesystem::path(args.out_dir) / kTokenCountsFile).string(), counts);
  std::cout << fmt::format("drafter {} -> {}: draft vocabulary of {} of {} tokens ({:.2f}% of the counted tokens)\n",
                           args.src, args.out_dir, args.draft_vocab, vocab, 100.0 * draft_vocab_coverage(counts, d2t));
  return 0;
}

int run_convert(const ConvertArgs& args) {
  namespace fs = std::filesystem;
  const int modes = int(!args.from.empty()) + int(!args.to.empty()) + int(args.draft_vocab != 0);
  if (modes != 1) fail("give exactly one of --from LAYOUT, --to LAYOUT and --draft-vocab N");
  if (args.draft_vocab < 0) fail("--draft-vocab must be > 0, not {}", args.draft_vocab);
  if (!fs::is_directory(args.target_dir)) fail("target model directory '{}' does not exist", args.target_dir);
  if (fs::absolute(args.src).lexically_normal() == fs::absolute(args.out_dir).lexically_normal())
    fail("--out must differ from the source directory");
  auto target = Transformer::load(args.target_dir);
  if (args.draft_vocab > 0) return run_reduce(args, *target);
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
  CLI::App* app = root.add_subcommand(
      "convert", "convert a drafter from / to DeepSpec's or z-lab's Hugging Face layout, or cut it to a draft vocabulary");
  app->add_option("--from", args->from, "read SRC in this layout: deepspec | zlab-dflash");
  app->add_option("--to", args->to, "write SRC (a native drafter) in this layout: deepspec");
  app->add_option("src", args->src, "source drafter directory")->required();
  app->add_option("--target", args->target_dir, "the target model directory")->required();
  app->add_option("--out", args->out_dir, "output directory")->required();
  app->add_option("--dtype", args->dtype, "output weights: auto (as the source stores them), f32 or bf16")
      ->capture_default_str();
  app->add_option("--draft-vocab", args->draft_vocab,
                  "cut SRC (native, whole vocabulary) to its N most frequent tokens (docs/drafter.md)");
  app->add_option("--data", args->data_dir, "--draft-vocab: count tokens in this regenerated data (dspark regen)");
  app->add_option("--token-counts", args->counts_path, "--draft-vocab: or read the counts (token_counts.json)");
  app->add_option("--max-len", args->max_len, "--data: tokens per sequence counted (as dspark train)")->capture_default_str();
  app->add_option("--max-shard-gb", args->max_shard_gb, "--to: shard the safetensors above this size (0: one file)")
      ->capture_default_str();
  return {app, [args] { return run_convert(*args); }};
}

}  // namespace dspark::cli
