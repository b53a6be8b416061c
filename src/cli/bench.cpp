// dspark bench: plain decoding and every given drafter on the same prompts, in one process,
// interleaved prompt by prompt (so machine noise hits all methods alike; the order reverses from
// one prompt to the next, so no method always runs first or after the same one), with tau, acceptance
// per position, tokens/s and speedup over plain decoding measured in the same run. With --rounds N
// the whole prompt set runs N times (the same seeds) and each round's speedup is reported beside the
// total's: the spread of a host whose speed moves by several percent within a run. With
// --interleave step the methods take turns by decoding step instead of by request, so a change in the
// host's speed lasting a few milliseconds hits them alike: ratios near 1 (auto mode choosing plain
// decoding) are resolved to a fraction of a percent instead of the several percent of request turns.
// Every step then starts with the caches another method's step left: harmless between methods that
// run the same forward, but it can move a speedup (models/default greedy, fixed verification: 2.09x
// in step turns, 1.73x in request turns minutes before), so speedups are for request turns.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "cli/model_args.h"
#include "engine/drafter_factory.h"
#include "engine/engine.h"
#include "engine/verify_setup.h"
#include "io/atomic_file.h"
#include "io/prompts_file.h"
#include "spec/decode_step.h"
#include "spec/spec_sequence.h"
#include "spec/speculation_governor.h"
#include "spec/speculative.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct BenchArgs {
  std::string model_dir;
  std::string prompts_path;
  std::vector<std::string> drafter_dirs;
  std::vector<std::string> draft_kinds;  // "ngram"
  std::vector<int64_t> draft_vocabs{0};   // each -d drafter with each (0: as stored)
  std::vector<std::string> draft_models;
  int64_t max_new = 128;
  int64_t gamma = 0;
  int64_t limit = 0;
  int64_t rounds = 1;
  std::string interleave = "request";  // request | step: the unit by which methods take turns
  std::vector<std::string> verify;  // one run of every DSpark / DFlash drafter per mode; empty: its default
  std::vector<std::string> sampled_verify{"block"};  // at temperature > 0, every drafter under each rule
  double conf_min = 0.5;
  SamplingParams sampling;
  bool json = false;
  std::string plot_path;
  RuntimeArgs runtime;
};

// Acceptance per position for every method (where drafts die), tau in the legend.
void write_plot(const std::string& path, const nlohmann::json& results) {
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"};
  size_t positions = 1;
  for (const auto& r : results) positions = std::max(positions, r["acceptance_per_position"].size());
  const double W = 560, H = 300, left = 50, top = 20, plot_w = 330, plot_h = 240;
  std::string svg = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='11'>\n", W, H + 20);
  svg += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='none' stroke='#999'/>\n", left, top, plot_w, plot_h);
  for (int i = 0; i <= 4; ++i)
    svg += fmt::format("<text x='{}' y='{}' text-anchor='end'>{:.2f}</text>\n", left - 4, top + plot_h * (1 - i / 4.0) + 4, i / 4.0);
  for (size_t k = 0; k < positions; ++k)
    svg += fmt::format("<text x='{}' y='{}' text-anchor='middle'>{}</text>\n",
                       left + plot_w * (positions == 1 ? 0.5 : double(k) / double(positions - 1)), top + plot_h + 14, k + 1);
  svg += fmt::format("<text x='{}' y='{}'>draft position (acceptance rate per verify step)</text>\n", left + 40, top + plot_h + 30);
  size_t c = 0;
  for (const auto& r : results) {
    const auto& acc = r["acceptance_per_position"];
    if (acc.empty()) continue;
    const char* color = colors[c++ % 7];
    std::string points;
    for (size_t k = 0; k < acc.size(); ++k)
      points += fmt::format("{:.1f},{:.1f} ", left + plot_w * (positions == 1 ? 0.5 : double(k) / double(positions - 1)),
                            top + plot_h * (1 - acc[k].get<double>()));
    svg += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='2'/>\n", points, color);
    svg += fmt::format("<text x='{}' y='{}' fill='{}'>{} ({}): tau {:.2f}, {:.2f}x</text>\n", left + plot_w + 10,
                       top + 14 * double(c), color, r["method"].get<std::string>(), r["verify"].get<std::string>(),
                       r["tau"].get<double>(), r["speedup"].get<double>());
  }
  svg += "</svg>\n";
  io::write_text_atomic(path, svg);
}

// One decoding method; each runs through its own serving engine (one slot, the loop on this
// thread), the code path of `dspark generate` and `dspark serve`. The engine lives for the whole
// run, so auto mode's governor keeps what it learned, as in a long-running server.
struct Method {
  std::string label;    // as given on the command line
  std::string kind;     // none | dspark | dflash | ngram | model
  std::shared_ptr<DrafterFactory> factory;
  SpecOptions options;
  std::shared_ptr<VerifySetup> setup = std::make_shared<VerifySetup>();
  std::unique_ptr<Engine> engine;
  SpecStats stats;
  int64_t tokens = 0;        // generated tokens after the first of each prompt
  double decode_seconds = 0;
  int64_t mismatches = 0;    // prompts whose output differs from plain decoding (temperature 0)
  std::vector<double> round_tps;  // tokens/s of each round
  // Step turns drive decode_step directly (the engine's own step, without its request loop); this
  // governor then persists over the run as the engine's does.
  SpeculationGovernor governor = SpeculationGovernor{};
};

// A result's drafter label as the 34-character table column shows it (long paths keep their end).
std::string column_label(const nlohmann::json& result) {
  const std::string label = result["drafter"].get<std::string>();
  return label.size() > 34 ? "..." + label.substr(label.size() - 31) : label;
}

// Mean milliseconds per verify cycle (decode phase only, prefill excluded).
nlohmann::json cycle_profile_ms(const SpecStats& s) {
  const double per = s.steps > 0 ? 1e3 / double(s.steps) : 0.0;
  return {{"target", s.target_seconds * per}, {"drafter", s.draft_seconds * per},
          {"acceptance", s.accept_seconds * per}, {"other", s.other_seconds() * per}};
}

int run_bench(const BenchArgs& args) {
  validate(args.sampling);
  if (args.rounds < 1) fail("--rounds must be >= 1, not {}", args.rounds);
  if (args.interleave != "request" && args.interleave != "step")
    fail("unknown --interleave '{}' (want request or step)", args.interleave);
  const bool step_turns = args.interleave == "step";
  LoadedModel loaded = load_model_dir(args.model_dir, args.runtime);
  Transformer& target = *loaded.model;
  std::vector<std::string> prompts = io::read_prompts_jsonl(args.prompts_path);
  if (args.limit > 0 && int64_t(prompts.size()) > args.limit) prompts.resize(size_t(args.limit));

  std::vector<Method> methods;
  methods.push_back({"none", "none", std::make_shared<DrafterFactory>(DrafterChoice{}, target)});
  const std::vector<std::string> verify_modes = args.verify.empty() ? std::vector<std::string>{""} : args.verify;
  const LoadOptions draft_load{args.runtime.dtype, args.runtime.device};
  for (const auto& dir : args.drafter_dirs) {
    for (int64_t draft_vocab : args.draft_vocabs) {
      auto factory = std::make_shared<DrafterFactory>(DrafterChoice{dir, "", "", draft_vocab}, target, draft_load);
      if (args.gamma > factory->block_size())
        fail("--gamma {} exceeds the block size {} of drafter {}", args.gamma, factory->block_size(), dir);
      // With several modes, a drafter without a confidence head runs once (fixed: the others need it).
      const bool once = verify_modes.size() > 1 && !factory->dspark()->config().confidence;
      for (const auto& mode : once ? std::vector<std::string>{"fixed"} : verify_modes) {
        methods.push_back({factory->label(), factory->kind(), factory});
        methods.back().options.conf_min = args.conf_min;
        prepare_verify(methods.back().options, *methods.back().setup, mode, target, args.model_dir, factory->dspark(), dir,
                       "", args.json);
      }
    }
  }
  for (const auto& kind : args.draft_kinds)
    methods.push_back({kind, kind, std::make_shared<DrafterFactory>(DrafterChoice{"", kind, ""}, target)});
  for (const auto& dir : args.draft_models)
    methods.push_back({dir, "model", std::make_shared<DrafterFactory>(DrafterChoice{"", "", dir}, target, draft_load)});
  SpecOptions o;
  o.max_new_tokens = args.max_new;
  o.gamma = args.gamma;
  o.sampling = args.sampling;
  o.eos_ids = loaded.eos_ids;
  o.conf_min = args.conf_min;
  // Every drafting method once per sampled verification rule (greedy decoding uses none: once).
  std::vector<std::string> rules = args.sampled_verify;
  if (args.sampling.greedy() || rules.empty()) rules.resize(1, "block");
  std::vector<Method> expanded;
  for (auto& m : methods)
    for (size_t i = 0; i < (m.factory->plain() ? 1 : rules.size()); ++i) {
      Method copy{m.label, m.kind, m.factory, m.options, m.setup};
      copy.options.sampled_verify = parse_sampled_verify(rules[i]);
      expanded.push_back(std::move(copy));
    }
  methods = std::move(expanded);
  for (auto& m : methods) {
    // Everything but the verify policy is shared; DSpark drafters keep their own policy.
    const SpecOptions own = m.options;
    m.options = o;
    m.options.sampled_verify = own.sampled_verify;
    if (m.kind == "dspark" || m.kind == "dflash") {
      m.options.verify = own.verify;
      m.options.calibration = own.calibration;
      m.options.sps = own.sps;
    }
    EngineOptions eo;
    eo.slots = 1;
    eo.own_thread = false;
    eo.stop_when_idle = true;
    eo.prefill_chunk = eo.prefill_budget = target.config().max_position_embeddings;  // the prompt at once
    m.engine = std::make_unique<Engine>(target, *m.factory, m.options, eo);
  }
  auto decode = [&](Method& m, const std::vector<int64_t>& prompt, uint64_t seed) {
    GenerationRequest request;
    request.prompt = prompt;
    request.max_new_tokens = o.max_new_tokens;
    request.sampling = o.sampling;
    request.sampling.seed = seed;
    std::shared_ptr<RequestState> state = m.engine->submit(std::move(request));
    m.engine->run();
    if (state->finish_reason() == FinishReason::Error) fail("{}", state->error());
    return state->result();
  };

  // One prompt through every method: their results and decode seconds (prefill excluded), in
  // method order. Request turns: each method decodes the whole request through its engine, the
  // methods in the given order on even prompts and in reverse on odd ones (a method that always ran
  // right after another, or first, would carry that position's effect on the caches and the host's
  // clock into its ratio). Step turns: one decoding step of every unfinished method in turn, the
  // order reversing every step, each method's steps timed on their own.
  auto run_prompt = [&](const std::vector<int64_t>& prompt, uint64_t seed, std::vector<SpecResult>& results,
                        std::vector<double>& seconds, size_t parity) {
    const size_t M = methods.size();
    results.assign(M, {});
    seconds.assign(M, 0.0);
    auto at = [&](size_t j, size_t turn) { return turn % 2 == 0 ? j : M - 1 - j; };
    if (!step_turns) {
      for (size_t j = 0; j < M; ++j) {
        const size_t k = at(j, parity);
        results[k] = decode(methods[k], prompt, seed);
        seconds[k] = results[k].stats.seconds - results[k].stats.prefill_seconds;
      }
      return;
    }
    const int64_t context = target.config().max_position_embeddings;
    std::vector<std::unique_ptr<Drafter>> drafters(M);
    std::vector<std::unique_ptr<SpecSequence>> sequences(M);
    std::vector<double> prefill_seconds(M, 0.0);
    for (size_t j = 0; j < M; ++j) {
      SpecOptions so = methods[j].options;
      so.max_new_tokens = std::min<int64_t>(so.max_new_tokens, context - int64_t(prompt.size()));
      so.sampling.seed = seed;
      drafters[j] = methods[j].factory->make();
      sequences[j] = std::make_unique<SpecSequence>(target, drafters[j].get(), prompt, so);
    }
    for (size_t turn = parity, busy = M; busy > 0; ++turn) {
      busy = 0;
      for (size_t j = 0; j < M; ++j) {
        const size_t k = at(j, turn);
        SpecSequence& s = *sequences[k];
        if (s.done()) continue;
        ++busy;
        StepOptions step;
        step.governor = &methods[k].governor;
        const bool prefill = s.phase() == SpecSequence::Phase::Prefill;
        const auto t0 = std::chrono::steady_clock::now();
        decode_step(target, {&s}, step);
        (prefill ? prefill_seconds[k] : seconds[k]) += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    }
    // A sequence's own clock ran through the other methods' steps: its times are its steps' alone.
    for (size_t j = 0; j < M; ++j) {
      results[j] = sequences[j]->take_result();
      results[j].stats.prefill_seconds = prefill_seconds[j];
      results[j].stats.seconds = prefill_seconds[j] + seconds[j];
    }
  };

  std::vector<std::vector<int64_t>> encoded;
  for (const auto& text : prompts) {
    std::vector<TokenId> ids = loaded.tokenizer->encode(text, true);
    if (ids.empty()) fail("{}: a prompt is empty after tokenization", args.prompts_path);
    encoded.emplace_back(ids.begin(), ids.end());
  }
  // Warm-up (allocations, thread pools), not measured.
  {
    std::vector<SpecResult> results;
    std::vector<double> seconds;
    run_prompt(encoded[0], o.sampling.seed, results, seconds, 0);
  }

  for (int64_t round = 0; round < args.rounds; ++round) {
    std::vector<std::pair<int64_t, double>> before;  // tokens and seconds before this round
    for (const auto& m : methods) before.emplace_back(m.tokens, m.decode_seconds);
    for (size_t i = 0; i < encoded.size(); ++i) {
      // The same seed for every method on this prompt (and in every round).
      std::vector<SpecResult> results;
      std::vector<double> seconds;
      run_prompt(encoded[i], o.sampling.seed + i, results, seconds, i % 2);
      for (size_t j = 0; j < methods.size(); ++j) {
        Method& m = methods[j];
        m.stats.add(results[j].stats);
        m.tokens += std::max<int64_t>(0, int64_t(results[j].tokens.size()) - 1);
        m.decode_seconds += seconds[j];
      }
      for (size_t j = 1; j < methods.size(); ++j)
        if (o.sampling.greedy() && results[j].tokens != results[0].tokens) ++methods[j].mismatches;
      if (!args.json)
        std::cerr << (args.rounds > 1 ? fmt::format("\rround {}/{}, prompt {}/{}", round + 1, args.rounds, i + 1, encoded.size())
                                      : fmt::format("\rprompt {}/{}", i + 1, encoded.size()))
                  << std::flush;
    }
    for (size_t j = 0; j < methods.size(); ++j) {
      const double seconds = methods[j].decode_seconds - before[j].second;
      methods[j].round_tps.push_back(seconds > 0 ? double(methods[j].tokens - before[j].first) / seconds : 0.0);
    }
  }
  if (!args.json) std::cerr << "\n";

  const double plain_tps = methods[0].decode_seconds > 0 ? methods[0].tokens / methods[0].decode_seconds : 0;
  nlohmann::json results = nlohmann::json::array();
  for (auto& m : methods) {
    const double tps = m.decode_seconds > 0 ? m.tokens / m.decode_seconds : 0;
    const char* verify_names[] = {"fixed", "threshold", "sts", "auto"};
    nlohmann::json r = {{"method", m.kind},
                        {"verify", m.factory->plain() ? "none"
                                   : std::string(verify_names[int(m.options.verify)]) +
                                         (!args.sampling.greedy() && m.options.sampled_verify == SampledVerify::Token ? "/token" : "")},
                        {"drafter", m.label},
                        {"tau", m.stats.tau()},
                        {"steps", m.stats.steps},
                        {"n_drafted", m.stats.n_drafted},
                        {"n_accepted", m.stats.n_accepted},
                        {"acceptance_per_position", m.stats.acceptance_per_position()},
                        {"tokens_per_second", tps},
                        {"speedup", plain_tps > 0 ? tps / plain_tps : 0.0},
                        {"cycle_ms", cycle_profile_ms(m.stats)},
                        // Verify steps that checked at least one draft: where `auto` decoded plainly, the rest.
                        {"steps_with_drafts", m.stats.drafted_at.empty() ? 0 : m.stats.drafted_at[0]}};
    if (args.rounds > 1) {
      std::vector<double> per_round;
      for (size_t k = 0; k < m.round_tps.size(); ++k)
        per_round.push_back(methods[0].round_tps[k] > 0 ? m.round_tps[k] / methods[0].round_tps[k] : 0.0);
      r["speedup_per_round"] = per_round;
    }
    if (o.sampling.greedy()) r["outputs_match"] = m.mismatches == 0;
    results.push_back(r);
  }
  if (!args.plot_path.empty()) write_plot(args.plot_path, results);
  if (args.json) {
    std::cout << nlohmann::json{{"model", args.model_dir}, {"prompts", encoded.size()}, {"max_new_tokens", args.max_new},
                                {"temperature", o.sampling.temperature}, {"interleave", args.interleave},
                                {"results", results}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("{} prompts{}, -n {}, temperature {}, methods take turns by {}\n", encoded.size(),
                           args.rounds > 1 ? fmt::format(" x {} rounds", args.rounds) : "", args.max_new,
                           o.sampling.temperature, args.interleave);
  std::cout << fmt::format("{:<8} {:<34} {:<9} {:>6} {:>9} {:>8}  {}\n", "method", "drafter", "verify", "tau", "tok/s",
                           "speedup", "acceptance per position");
  for (const auto& r : results) {
    std::string acc;
    for (double a : r["acceptance_per_position"]) acc += fmt::format("{:.2f} ", a);
    const std::string label = column_label(r);
    std::cout << fmt::format("{:<8} {:<34} {:<9} {:>6.2f} {:>9.1f} {:>7.2f}x  {}{}\n", r["method"].get<std::string>(),
                             label, r["verify"].get<std::string>(), r["tau"].get<double>(),
                             r["tokens_per_second"].get<double>(), r["speedup"].get<double>(), acc,
                             r.contains("outputs_match") && !r["outputs_match"].get<bool>() ? " OUTPUT MISMATCH" : "");
  }
  if (args.rounds > 1) {
    std::cout << "\nspeedup per round (plain decoding's tokens/s in the same round)\n";
    for (const auto& r : results) {
      std::string rounds;
      for (double x : r["speedup_per_round"]) rounds += fmt::format("{:.2f}x ", x);
      std::cout << fmt::format("{:<8} {:<34} {:<9} {}\n", r["method"].get<std::string>(), column_label(r),
                               r["verify"].get<std::string>(), rounds);
    }
  }
  std::cout << "\nper verify cycle (ms): target forward | drafter (propose + commit) | acceptance | rest of the loop\n";
  for (const auto& r : results) {
    const auto& c = r["cycle_ms"];
    const double steps = std::max(1.0, r["steps"].get<double>());
    std::cout << fmt::format("{:<8} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f}   drafter/target {:.2f}, drafts verified in {:.1f}% "
                             "of the steps\n",
                             r["method"].get<std::string>(), c["target"].get<double>(), c["drafter"].get<double>(),
                             c["acceptance"].get<double>(), c["other"].get<double>(),
                             c["drafter"].get<double>() / std::max(1e-12, c["target"].get<double>()),
                             100.0 * r["steps_with_drafts"].get<double>() / steps);
  }
  return 0;
}

}  // namespace

Command add_bench(CLI::App& root) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* app = root.add_subcommand("bench", "plain vs speculative decoding side by side");
  app->add_option("-m,--model", args->model_dir, "target model directory")->required();
  app->add_option("--prompts", args->prompts_path, "prompts, JSON lines with a \"prompt\" field")->required();
  app->add_option("-d,--drafter", args->drafter_dirs, "DSpark / DFlash drafter directories");
  app->add_option("--draft", args->draft_kinds, "model-free drafters: ngram");
  app->add_option("--draft-vocab", args->draft_vocabs,
                  "run each -d drafter cut to each of these draft vocabularies (0: as stored; docs/drafter.md)")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--draft-model", args->draft_models, "small draft LMs sharing the target's tokenizer");
  app->add_option("-n,--n-predict", args->max_new, "tokens per prompt")->capture_default_str();
  app->add_option("--gamma", args->gamma, "draft tokens per verify step (default: the drafter's block size)");
  app->add_option("--verify", args->verify,
                  "fixed | threshold | sts | auto, or a comma list to run every drafter under each (default: auto for "
                  "DSpark drafters)")
      ->delimiter(',');
  app->add_option("--conf-min", args->conf_min, "threshold mode: cut drafts at the first confidence below this");
  app->add_option("--sampled-verify", args->sampled_verify,
                  "temperature > 0: block | token verification, or a comma list to run every drafter under each")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--limit", args->limit, "use only the first N prompts");
  app->add_option("--rounds", args->rounds, "run the prompt set this many times (the same seeds); prints each round's speedup")
      ->capture_default_str();
  app->add_option("--temp", args->sampling.temperature, "temperature (0 = greedy)");
  app->add_option("--top-k", args->sampling.top_k, "top-k (0 = off)");
  app->add_option("--top-p", args->sampling.top_p, "top-p (1 = off)");
  app->add_option("--seed", args->sampling.seed, "random seed");
  app->add_option("--interleave", args->interleave,
                  "request | step: methods take turns by whole request (through the serving engine; for "
                  "speedups) or by decoding step (resolves ratios near 1, e.g. auto choosing plain decoding; "
                  "each step finds the caches another method left)")
      ->capture_default_str();
  app->add_flag("--json", args->json, "print one JSON object {\"results\": [...]}");
  app->add_option("--plot", args->plot_path, "write an SVG of acceptance per position and tau for each method");
  args->runtime.add_to(app);
  return {app, [args] { return run_bench(*args); }};
}

}  // namespace dspark::cli
