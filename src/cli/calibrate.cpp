// dspark calibrate: Sequential Temperature Scaling of a drafter's confidence head on held-out
// prompts (real speculative decoding in fixed mode), with ECE / AUROC / Brier per position before
// and after, and a reliability diagram.
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "drafter/deepspec_format.h"
#include "cli/model_args.h"
#include "drafter/dspark_drafter.h"
#include "io/prompts_file.h"
#include "spec/calibration.h"
#include "spec/dspark_source.h"
#include "spec/speculative.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct CalibrateArgs {
  std::string model_dir, drafter_dir, prompts_path, out_path, svg_path;
  int64_t max_new = 128;
  SamplingParams sampling;
  std::string sampled_verify = "block";
  RuntimeArgs runtime;
};

int run_calibrate(const CalibrateArgs& args) {
  LoadedModel loaded = load_model_dir(args.model_dir, args.runtime);
  auto drafter = std::shared_ptr<DSparkDrafter>(load_drafter_dir(args.drafter_dir, *loaded.model));
  if (!drafter->config().confidence) fail("drafter '{}' has no confidence head to calibrate", args.drafter_dir);
  const std::vector<std::string> prompts = io::read_prompts_jsonl(args.prompts_path);
  DSparkSource source(drafter, *loaded.model);
  CalibrationData data;
  SpecOptions o;
  o.max_new_tokens = args.max_new;
  o.sampling = args.sampling;
  o.eos_ids = loaded.eos_ids;
  o.verify = VerifyMode::Fixed;
  o.sampled_verify = parse_sampled_verify(args.sampled_verify);
  o.on_verify = [&](const DraftProposal& p, int64_t accepted) {
    data.conf_logits.push_back(p.conf_logits);
    data.accepted.push_back(accepted);
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<TokenId> ids = loaded.tokenizer->encode(prompts[i], true);
    if (ids.empty()) continue;
    o.sampling.seed = args.sampling.seed + i;
    generate_speculative(*loaded.model, &source, std::vector<int64_t>(ids.begin(), ids.end()), o);
    std::cerr << fmt::format("\rprompt {}/{} ({} verify steps)", i + 1, prompts.size(), data.accepted.size()) << std::flush;
  }
  std::cerr << "\n";
  const int64_t g = drafter->config().max_drafts();
  const auto before = calibration_metrics(data, std::vector<double>(size_t(g), 1.0));
  Calibration cal = fit_sts(data, g);
  cal.drafter = drafter->calibration_fingerprint();
  const auto after = calibration_metrics(data, cal.temperatures);
  // Default: where generate / bench / serve look for it, by decoding mode (spec/calibration.h).
  const std::string out =
      !args.out_path.empty() ? args.out_path
                             : (std::filesystem::path(args.drafter_dir) /
                                (args.sampling.greedy() ? kGreedyCalibrationFile : kSampledCalibrationFile))
                                   .string();
  save_calibration(out, cal, before, after);
  const std::string svg =
      args.svg_path.empty() ? std::filesystem::path(out).replace_extension(".svg").string() : args.svg_path;
  write_reliability_svg(svg, data, cal);
  std::cout << fmt::format("{} verify steps from {} prompts\n", data.accepted.size(), prompts.size());
  std::cout << " k    count      T   ECE before  ECE after  AUROC  Brier before  Brier after\n";
  for (size_t k = 0; k < before.size(); ++k)
    std::cout << fmt::format("{:>2} {:>8} {:>6.3f} {:>12.4f} {:>10.4f} {:>6.3f} {:>13.4f} {:>12.4f}\n", k + 1,
                             before[k].count, cal.temperatures[k], before[k].ece, after[k].ece, after[k].auroc,
                             before[k].brier, after[k].brier);
  std::cout << fmt::format("wrote {} and {}\n", out, svg);
  return 0;
}

}  // namespace

Command add_calibrate(CLI::App& root) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* app = root.add_subcommand("calibrate", "fit STS temperatures of a drafter's confidence head");
  app->add_option("-m,--model", args->model_dir, "target model directory")->required();
  app->add_option("-d,--drafter", args->drafter_dir, "DSpark drafter directory")->required();
  app->add_option("--prompts", args->prompts_path, "held-out prompts (JSON lines)")->required();
  app->add_option("--out", args->out_path,
                  "calibration file (default: DRAFTER/calibration.json, with --temp > 0 DRAFTER/calibration-sampled.json; "
                  "generate, bench and serve read those)");
  app->add_option("--svg", args->svg_path, "reliability diagram (default: OUT with .svg)");
  app->add_option("-n,--n-predict", args->max_new, "tokens per prompt")->capture_default_str();
  app->add_option("--temp", args->sampling.temperature, "temperature of the decoding runs (0 = greedy)");
  app->add_option("--seed", args->sampling.seed, "random seed");
  app->add_option("--sampled-verify", args->sampled_verify,
                  "temperature > 0: the verification rule the calibration is for (block or token)")
      ->capture_default_str();
  args->runtime.add_to(app);
  return {app, [args] { return run_calibrate(*args); }};
}

}  // namespace dspark::cli
