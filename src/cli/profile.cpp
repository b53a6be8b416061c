// dspark profile: the cost of one target forward over a chunk of T = 1..max tokens after a fixed
// context, i.e. target steps per second SPS(T). Verify-k vs verify-1 side by side in one run.
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

#include <filesystem>

#include "cli/command.h"
#include "cli/model_args.h"
#include "kernels/bandwidth.h"
#include "model/device.h"
#include "engine/drafter_factory.h"
#include "spec/scheduler.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct ProfileArgs {
  std::string model_dir;
  int64_t max_tokens = 16;
  int64_t context = 64;
  int64_t repeats = 5;
  int64_t batch = 1;
  bool json = false;
  std::string out;
  bool no_save = false;
  bool bandwidth = true;
  std::string drafter_dir;
  int64_t draft_vocab = 0;  // --draft-vocab: the drafter cut at load (0: as stored)
  RuntimeArgs runtime;
};

// Bytes of weights one decode step reads: every matrix and vector once, plus one embedding row
// (the LM head is read in full; a tied head is the embedding, counted once; Gemma4's per-layer
// embedding table: one row).
int64_t weight_bytes_per_token(Transformer& model) {
  ModelWeights& w = model.weights();
  int64_t bytes = 0;
  for (auto& [name, t] : w.named()) {
    if (!t->defined()) continue;
    if (t->is_same(w.embed)) continue;
    // Gemma4's per-layer embedding table: one row per token, like the token embedding.
    if (w.embed_per_layer.defined() && t->is_same(w.embed_per_layer)) {
      bytes += t->size(1) * int64_t(t->element_size());
      continue;
    }
    bytes += t->numel() * int64_t(t->element_size());
  }
  const bool tied = w.lm_head.defined() && w.lm_head.is_same(w.embed);
  bytes += tied ? w.embed.numel() * int64_t(w.embed.element_size()) : w.embed.size(1) * int64_t(w.embed.element_size());
  return bytes;
}

// One greedy draft block of `g` tokens after `context` tokens, through the Drafter interface
// exactly as speculative decoding calls it, timed two ways (median seconds each):
//   back_to_back: blocks in a row, the drafter's weights and context in cache;
//   after_verify: each block right after a target forward of g + 1 tokens, as in the decoding
//     loop. A target whose weights exceed the cache evicts the drafter's between two blocks (on
//     the default target this doubled the block's time), which the first figure hides.
// Neither includes the context extension by the accepted rows (bench reports the whole loop).
struct DraftBlockTimes {
  double back_to_back = 0, after_verify = 0;
  int64_t g = 0;
};

DraftBlockTimes measure_draft_block(Transformer& target, const DrafterChoice& choice, int64_t context, int64_t repeats) {
  torch::NoGradGuard no_grad;
  const DrafterFactory factory(choice, target);
  std::unique_ptr<Drafter> drafter = factory.make();
  Drafter& source = *drafter;
  const int64_t V = target.config().vocab_size, g = factory.block_size();
  std::vector<int64_t> prefix(static_cast<size_t>(context));
  for (int64_t i = 0; i < context; ++i) prefix[size_t(i)] = (i * 7919 + 13) % V;
  KVCache cache = target.new_cache();
  ChunkOutput prefill = target.forward(cache, prefix, LogitsAt::Last, source.taps());
  source.begin(prefix, prefill);
  SamplingParams greedy;
  Rng rng(0);
  auto time_block = [&](int64_t r) {
    const auto start = std::chrono::steady_clock::now();
    source.propose((r * 31 + 5 + V) % V, g, greedy, rng);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> back_to_back, after_verify;
  for (int64_t r = -1; r < repeats; ++r) {  // r = -1 warms up
    const double s = time_block(r);
    if (r >= 0) back_to_back.push_back(s);
  }
  std::vector<int64_t> chunk(static_cast<size_t>(g + 1));
  for (int64_t r = 0; r < repeats; ++r) {
    for (int64_t i = 0; i <= g; ++i) chunk[size_t(i)] = (r * 31 + i * 17 + 5 + V) % V;
    target.forward(cache, chunk, LogitsAt::All, source.taps());
    synchronize(target.device());  // a GPU forward returns once queued: the block's time is its own
    cache.truncate(context);
    after_verify.push_back(time_block(r));
  }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(back_to_back), median(after_verify), g};
}

int run_profile(const ProfileArgs& args) {
  args.runtime.apply();
  auto model = Transformer::load(args.model_dir, LoadOptions{args.runtime.dtype, args.runtime.device});
  const SpsProfile p = measure_sps(*model, args.max_tokens, args.context, args.repeats, args.batch);
  // Saved next to the model (or --out), where generate --verify auto finds it.
  const std::string out = args.out.empty() ? (std::filesystem::path(args.model_dir) / "sps_profile.json").string() : args.out;
  if (!args.no_save) save_sps_profile(out, p);
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < p.steps_per_second.size(); ++i)
    rows.push_back({{"tokens", i + 1}, {"ms", 1e3 / p.steps_per_second[i]}, {"steps_per_second", p.steps_per_second[i]},
                    {"cost_vs_1", p.steps_per_second[0] / p.steps_per_second[i]}});
  nlohmann::json j = {{"model", args.model_dir}, {"dtype", p.dtype}, {"threads", p.threads}, {"kernels", p.kernels},
                      {"context", args.context},
                      {"repeats", args.repeats}, {"rows", rows}, {"saved", args.no_save ? "" : out}};
  // Batched forwards: R sequences of t tokens each, cost relative to one sequence of 1 token.
  nlohmann::json batch_rows = nlohmann::json::array();
  for (size_t r = 0; r < p.batch.size(); ++r)
    for (size_t t = 0; t < p.batch[r].size(); ++t)
      batch_rows.push_back({{"sequences", r + 2}, {"tokens_each", t + 1}, {"ms", 1e3 / p.batch[r][t]},
                            {"cost_vs_1", p.steps_per_second[0] / p.batch[r][t]}});
  if (!batch_rows.empty()) j["batch_rows"] = batch_rows;
  const int64_t weight_bytes = weight_bytes_per_token(*model);
  j["weight_bytes_per_token"] = weight_bytes;
  if (args.bandwidth && model->device().is_cpu()) {
    const kernels::BandwidthResult bw = kernels::measure_read_bandwidth();
    const double limit_tps = bw.bytes_per_second / double(weight_bytes);
    j["read_bandwidth_gb_s"] = bw.bytes_per_second / 1e9;
    j["bandwidth_limit_tokens_per_second"] = limit_tps;
    j["fraction_of_bandwidth_limit"] = p.steps_per_second[0] / limit_tps;
  }
  int64_t g = 0;
  if (!args.drafter_dir.empty()) {
    const DraftBlockTimes block = measure_draft_block(
        *model, DrafterChoice{args.drafter_dir, "", "", args.draft_vocab}, args.context, std::max<int64_t>(args.repeats, 5));
    g = block.g;
    j["draft_block_ms"] = block.back_to_back * 1e3;
    j["draft_block_after_verify_ms"] = block.after_verify * 1e3;
    j["draft_block_size"] = g;
    // Against a verify of g + 1 tokens, with the block's time as the decoding loop pays it.
    if (g + 1 <= int64_t(p.steps_per_second.size()))
      j["draft_block_vs_verify"] = block.after_verify * p.steps_per_second[size_t(g)];
  }
  if (args.json) {
    std::cout << j.dump() << "\n";
  } else {
    std::cout << fmt::format("{} ({}, {} threads{}, context {})\n", args.model_dir, p.dtype, p.threads,
                             p.kernels.empty() ? "" : ", kernels " + p.kernels, args.context);
    std::cout << "  T        ms   steps/s  cost vs T=1\n";
    for (auto& row : rows)
      std::cout << fmt::format("{:>3} {:>9.2f} {:>9.1f} {:>12.2f}\n", row["tokens"].get<int64_t>(),
                               row["ms"].get<double>(), row["steps_per_second"].get<double>(),
                               row["cost_vs_1"].get<double>());
    if (!p.batch.empty()) {
      std::cout << "  R x t: cost vs one sequence of 1 token\n";
      for (size_t r = 0; r < p.batch.size(); ++r) {
        std::string line = fmt::format("{:>3} x", r + 2);
        for (double sps : p.batch[r]) line += fmt::format(" {:>6.2f}", p.steps_per_second[0] / sps);
        std::cout << line << "\n";
      }
    }
    std::cout << fmt::format("weights read per token: {:.1f} MB\n", weight_bytes / 1e6);
    if (j.contains("read_bandwidth_gb_s"))
      std::cout << fmt::format("memory read bandwidth: {:.1f} GB/s ({} threads) -> limit {:.1f} tokens/s; T=1 reaches {:.0f}%\n",
                               j["read_bandwidth_gb_s"].get<double>(), p.threads,
                               j["bandwidth_limit_tokens_per_second"].get<double>(),
                               100 * j["fraction_of_bandwidth_limit"].get<double>());
    if (j.contains("draft_block_ms"))
      std::cout << fmt::format("draft block (g = {}): {:.2f} ms back to back, {:.2f} ms after a verify{}\n", g,
                               j["draft_block_ms"].get<double>(), j["draft_block_after_verify_ms"].get<double>(),
                               j.contains("draft_block_vs_verify")
                                   ? fmt::format(" = {:.2f} x a verify of {} tokens", j["draft_block_vs_verify"].get<double>(), g + 1)
                                   : std::string());
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
  app->add_option("--batch", args->batch, "also measure forwards of 2..N sequences (the server's --parallel)");
  app->add_flag("--json", args->json, "print JSON");
  app->add_option("--out", args->out, "where to save the profile (default MODEL/sps_profile.json)");
  app->add_flag("--no-save", args->no_save, "only print");
  app->add_flag("!--no-bandwidth", args->bandwidth, "skip the memory-bandwidth probe");
  app->add_option("-d,--drafter", args->drafter_dir, "also time one DSpark/DFlash draft block");
  app->add_option("--draft-vocab", args->draft_vocab,
                  "the -d drafter cut at load to its N most frequent tokens (token_counts.json beside it)");
  args->runtime.add_to(app);
  return {app, [args] { return run_profile(*args); }};
}

}  // namespace dspark::cli
