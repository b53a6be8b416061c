// The serving engine: continuous batching gives every request exactly what it would get alone
// (greedy, and seeded sampling with a fixed verify length), requests join and leave between
// steps, and cancellation, queueing and shutdown never lose a request.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "drafter/dspark_drafter.h"
#include "engine/drafter_factory.h"
#include "engine/engine.h"
#include "spec/decode_step.h"
#include "support/tiny_models.h"
#include "util/error.h"

namespace dspark {
namespace {

std::vector<int64_t> random_prompt(int64_t length, uint64_t seed, int64_t vocab = 97) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> p;
  for (int64_t i = 0; i < length; ++i) p.push_back(int64_t(rng() % uint64_t(vocab)));
  return p;
}

// A tiny DSpark drafter with randomised Markov and confidence heads, saved so that the factory
// loads it like a user's drafter directory.
std::string tiny_drafter_dir(Transformer& target) {
  DSparkDrafter drafter(testing::tiny_drafter_config(4), TargetIdentity::of(target), 3);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : drafter.named_parameters())
      if (name.rfind("markov.", 0) == 0 || name.rfind("conf.", 0) == 0) t.copy_(torch::randn_like(t));
  }
  const std::string dir = testing::temp_dir("engine-drafter");
  drafter.save(dir);
  return dir;
}

// Row-invariant numerics: a sequence's logits are bit-identical whether it runs alone or shares
// the forward with other sequences, and however its prompt is chunked.
TEST(RowInvariance, BatchedAndChunkedForwardEqualsAloneBitwise) {
  for (const std::string kind : {"qwen3", "gemma2", "gemma3"}) {
    auto model = testing::tiny_model(kind, torch::kFloat32, 4);
    const std::vector<int64_t> a = random_prompt(23, 1), b = random_prompt(9, 2), c = random_prompt(31, 3);
    KVCache alone = model->new_cache();
    at::Tensor ref_prefill = model->forward(alone, a, LogitsAt::All).logits;
    at::Tensor ref_step = model->forward(alone, {5, 7, 11}, LogitsAt::All).logits;

    KVCache ca = model->new_cache(), cb = model->new_cache(), cc = model->new_cache();
    std::vector<SequenceChunk> first = {{&cb, b, LogitsAt::All},
                                        {&ca, std::vector<int64_t>(a.begin(), a.begin() + 10), LogitsAt::All},
                                        {&cc, c, LogitsAt::Last}};
    auto out1 = model->forward(first);
    std::vector<SequenceChunk> second = {{&ca, std::vector<int64_t>(a.begin() + 10, a.end()), LogitsAt::All},
                                         {&cc, {1, 2}, LogitsAt::All}};
    auto out2 = model->forward(second);
    std::vector<SequenceChunk> third = {{&cb, {3}, LogitsAt::All}, {&ca, {5, 7, 11}, LogitsAt::All}};
    auto out3 = model->forward(third);
    EXPECT_TRUE(torch::equal(torch::cat({out1[1].logits, out2[0].logits}, 0), ref_prefill)) << kind;
    EXPECT_TRUE(torch::equal(out3[1].logits, ref_step)) << kind;
  }
}

struct EngineFixture : ::testing::Test {
  void SetUp() override {
    target = testing::tiny_model("qwen3", torch::kFloat32, 5);
    drafter_dir = tiny_drafter_dir(*target);
  }
  void TearDown() override { std::filesystem::remove_all(drafter_dir); }

  // What generate_speculative gives this prompt alone.
  SpecResult alone(const DrafterFactory& factory, const std::vector<int64_t>& prompt, int64_t max_new,
                   const SamplingParams& sampling = {}) {
    SpecOptions o;
    o.max_new_tokens = max_new;
    o.sampling = sampling;
    o.eos_ids = {3};
    auto drafter = factory.make();
    return generate_speculative(*target, drafter.get(), prompt, o);
  }

  std::unique_ptr<Transformer> target;
  std::string drafter_dir;
};

TEST_F(EngineFixture, GreedyOutputsEqualSingleRequestOutputsWhateverTheBatch) {
  for (const DrafterChoice& choice : {DrafterChoice{}, DrafterChoice{drafter_dir, "", ""}, DrafterChoice{"", "ngram", ""}}) {
    DrafterFactory factory(choice, *target);
    SpecOptions base;
    base.eos_ids = {3};
    EngineOptions eo;
    eo.slots = 3;
    eo.prefill_chunk = 7;  // prompts cross chunk boundaries, and chunks share forwards with decoding
    eo.prefill_budget = 10;
    Engine engine(*target, factory, base, eo);
    std::vector<std::shared_ptr<RequestState>> states;
    std::vector<std::vector<int64_t>> prompts;
    for (int i = 0; i < 9; ++i) {
      prompts.push_back(random_prompt(2 + 5 * i, 100 + i));
      GenerationRequest r;
      r.prompt = prompts.back();
      r.max_new_tokens = 6 + 3 * i;
      states.push_back(engine.submit(r));
    }
    for (int i = 0; i < 9; ++i) {
      ASSERT_TRUE(states[i]->wait(std::chrono::seconds(60)));
      EXPECT_NE(states[i]->finish_reason(), FinishReason::Error) << states[i]->error();
      EXPECT_EQ(states[i]->result().tokens, alone(factory, prompts[i], 6 + 3 * i).tokens) << factory.kind() << " " << i;
    }
    const EngineCounters c = engine.counters();
    EXPECT_EQ(c.requests_finished, 9);
    EXPECT_LT(c.steps, c.busy_slot_steps);  // requests really shared forwards
  }
}

TEST_F(EngineFixture, SeededSamplingIsReproducibleWhateverTheBatch) {
  DrafterFactory factory({drafter_dir, "", ""}, *target);
  SpecOptions base;
  base.eos_ids = {3};
  EngineOptions eo;
  eo.slots = 4;
  Engine engine(*target, factory, base, eo);  // verify: fixed
  SamplingParams sampling;
  sampling.temperature = 1.0;
  sampling.top_k = 20;
  sampling.seed = 77;
  const std::vector<int64_t> prompt = random_prompt(12, 9);
  std::vector<std::shared_ptr<RequestState>> states;
  for (int i = 0; i < 4; ++i) {
    GenerationRequest r;
    r.prompt = i == 0 ? prompt : random_prompt(5 + i, 50 + i);
    r.max_new_tokens = 24;
    r.sampling = sampling;
    states.push_back(engine.submit(r));
  }
  ASSERT_TRUE(states[0]->wait(std::chrono::seconds(60)));
  EXPECT_EQ(states[0]->result().tokens, alone(factory, prompt, 24, sampling).tokens);
  for (auto& s : states) ASSERT_TRUE(s->wait(std::chrono::seconds(60)));
}

TEST_F(EngineFixture, CallerStopCancelQueueAndShutdown) {
  DrafterFactory factory({"", "ngram", ""}, *target);
  EngineOptions eo;
  eo.slots = 2;
  auto engine = std::make_unique<Engine>(*target, factory, SpecOptions{}, eo);
  // The caller ends a request after 4 tokens (a stop string).
  int seen = 0;
  GenerationRequest stop_after_4;
  stop_after_4.prompt = random_prompt(6, 1);
  stop_after_4.max_new_tokens = 40;
  stop_after_4.on_token = [&seen](int64_t) { return ++seen < 4; };
  auto stopped = engine->submit(stop_after_4);
  ASSERT_TRUE(stopped->wait(std::chrono::seconds(30)));
  EXPECT_EQ(stopped->finish_reason(), FinishReason::Stop);
  EXPECT_EQ(stopped->result().tokens.size(), 4u);

  // More requests than slots wait in the queue and all finish; a cancelled one frees its slot.
  std::vector<std::shared_ptr<RequestState>> states;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    r.prompt = random_prompt(4 + i, 20 + i);
    r.max_new_tokens = 200;
    states.push_back(engine->submit(r));
  }
  states[0]->cancel();
  for (auto& s : states) ASSERT_TRUE(s->wait(std::chrono::seconds(60)));
  EXPECT_EQ(states[0]->finish_reason(), FinishReason::Cancelled);
  for (int i = 1; i < 6; ++i) EXPECT_EQ(states[i]->finish_reason(), FinishReason::Length) << i;

  // A prompt that fills the context is refused at submit.
  GenerationRequest too_long;
  too_long.prompt = random_prompt(target->config().max_position_embeddings, 3);
  EXPECT_THROW(engine->submit(too_long), Error);

  // Shutdown with draining: running requests finish, queued ones are cancelled, new ones refused.
  std::vector<std::shared_ptr<RequestState>> last;
  for (int i = 0; i < 5; ++i) {
    GenerationRequest r;
    r.prompt = random_prompt(4, 40 + i);
    r.max_new_tokens = 30;
    last.push_back(engine->submit(r));
  }
  // Until two of them hold the slots (finish() of the previous requests precedes the worker's
  // bookkeeping, so `processing` alone may still count one of those).
  while (engine->counters().waiting > 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine->shutdown(/*drain=*/true);
  int finished = 0, cancelled = 0;
  for (auto& s : last) {
    ASSERT_TRUE(s->finished());
    if (s->finish_reason() == FinishReason::Cancelled) ++cancelled;
    else if (s->finish_reason() == FinishReason::Length) ++finished;
    else ADD_FAILURE() << finish_reason_name(s->finish_reason()) << " " << s->error();
  }
  EXPECT_EQ(finished + cancelled, 5);
  EXPECT_GE(finished, 1);
  GenerationRequest late;
  late.prompt = random_prompt(4, 1);
  EXPECT_THROW(engine->submit(late), Error);
}

TEST(BatchSps, InterpolatesPerBatchAndScheduleVerifiesLessUnderLoad) {
  SpsProfile p;
  p.steps_per_second = {100, 95, 90, 85};        // B = 1..4, one sequence
  p.batch = {{90, 70, 50, 40}, {80, 50, 30, 20}};  // R = 2, 3: t = 1..4 tokens each
  EXPECT_DOUBLE_EQ(p.sps(3), 90);
  EXPECT_DOUBLE_EQ(p.sps(2, 2), 90);              // t = 1
  EXPECT_DOUBLE_EQ(p.sps(4, 2), 70);              // t = 2
  EXPECT_NEAR(1.0 / p.sps(3, 2), 0.5 / 90 + 0.5 / 70, 1e-12);  // t = 1.5: times interpolated
  EXPECT_NEAR(p.sps(16, 2), 40.0 * 4 / 8, 1e-9);  // t = 8 beyond the table: cost per token
  EXPECT_DOUBLE_EQ(p.sps(9, 5), p.sps(9, 3));     // more requests than measured: the largest batch
  // The same survival curve: alone, every draft is worth verifying; three requests together pay
  // the steep batch cost and verify fewer.
  const std::vector<double> a = {0.9, 0.8, 0.7};
  const auto one = schedule_verify_lengths({a}, p);
  const auto three = schedule_verify_lengths({a, a, a}, p);
  EXPECT_EQ(one[0], 3);
  EXPECT_LT(three[0] + three[1] + three[2], 9);
}

TEST(SpeculationGovernor, DraftsOnlyWhenItPaysAndProbes) {
  SpsProfile p;
  p.steps_per_second = {1000, 900, 800, 700, 600, 500, 450, 400};  // 1 ms for one token, 2.5 ms for 8
  SpeculationGovernor g(4);
  EXPECT_TRUE(g.should_draft(1, p));  // nothing observed yet
  // Cheap drafter, tau 3 with 7 verified: 3 tokens in 0.1 + 2.5 ms beats 1 token per ms. (The
  // first observed step is a warm-up and does not count.)
  g.observe(0.5, 1.0, 7.0);
  EXPECT_TRUE(g.should_draft(1, p));
  g.observe(0.0001, 3.0, 7.0);
  EXPECT_GT(g.predicted_spec(1, p), g.predicted_plain(1, p));
  EXPECT_TRUE(g.should_draft(1, p));
  // The drafter becomes expensive (3 ms per block): plain wins; drafting resumes every 4th step.
  // It drafts (warm-up + kMinObserved steps) before its first decision.
  SpeculationGovernor slow(4);
  for (int64_t i = 0; i <= SpeculationGovernor::kMinObserved; ++i) {
    EXPECT_TRUE(slow.should_draft(1, p));
    slow.observe(0.003, 3.0, 7.0);
  }
  EXPECT_LT(slow.predicted_spec(1, p), slow.predicted_plain(1, p));
  std::vector<bool> decisions;
  for (int i = 0; i < 8; ++i) decisions.push_back(slow.should_draft(1, p));
  EXPECT_EQ(decisions, (std::vector<bool>{false, false, false, true, false, false, false, true}));
  EXPECT_EQ(slow.skipped_steps(), 6);
  // A probe that confirms plain decoding doubles the interval to the next one.
  slow.observe(0.003, 3.0, 7.0);
  decisions.clear();
  for (int i = 0; i < 8; ++i) decisions.push_back(slow.should_draft(1, p));
  EXPECT_EQ(decisions, (std::vector<bool>{false, false, false, false, false, false, false, true}));
}

// Probes that cost little stop spacing out at 64x probe_every; costly ones (measured in plain steps)
// space out until they take at most 0.1% of the decoding time. A plain step here takes 1 ms.
TEST(SpeculationGovernor, CostlyProbesWaitLonger) {
  SpsProfile p;
  p.steps_per_second = {1000, 900, 800, 700, 600, 500, 450, 400};
  auto probe_gaps = [&](double cost) {
    SpeculationGovernor g(4);
    for (int64_t i = 0; i <= SpeculationGovernor::kMinObserved; ++i) {
      g.should_draft(1, p);
      g.observe(0.003, 3.0, 7.0);  // a drafter too slow to pay
    }
    std::vector<int64_t> gaps;
    int64_t since = 0;
    for (int step = 0; step < 40000; ++step) {
      ++since;
      if (!g.should_draft(1, p)) continue;
      gaps.push_back(since);
      since = 0;
      g.observe(0.003, 3.0, 7.0);
      g.observe_probe(cost * 0.001, 0.001, 1, 1, p);  // drafting of `cost` plain steps, a plain-length forward
    }
    return gaps;
  };
  const std::vector<int64_t> cheap = probe_gaps(0.0);
  EXPECT_EQ(std::vector<int64_t>(cheap.begin(), cheap.begin() + 8), (std::vector<int64_t>{4, 8, 16, 32, 64, 128, 256, 256}));
  EXPECT_EQ(cheap.back(), 256);
  const std::vector<int64_t> costly = probe_gaps(4.0);  // a probe costs 4 plain steps: one per 4000 steps
  EXPECT_EQ(std::vector<int64_t>(costly.begin(), costly.begin() + 11),
            (std::vector<int64_t>{4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4000}));
  EXPECT_EQ(costly.back(), 4000);
}

// A governor (probe_every 4) whose drafting stays just below the margin probes after each of
// `gaps` steps (each probe confirming plain decoding), then after `lucky_gap` steps once more with a
// long accepted run that tips the means back to drafting for a few steps. Returns the interval from
// the step that chose plain decoding again to the next probe.
int64_t interval_after_a_lucky_probe(const std::vector<int64_t>& gaps, int64_t lucky_gap) {
  SpsProfile p;
  p.steps_per_second = {1000, 900, 800, 700, 600, 500, 450, 400};
  SpeculationGovernor g(4);
  for (int64_t i = 0; i <= SpeculationGovernor::kMinObserved; ++i) {
    g.should_draft(1, p);
    g.observe(0.0005, 1.6, 1.0);  // 1.6 tokens in 0.5 + 1.1 ms: near 1 token per ms, below the margin
  }
  auto next_probe = [&] {  // steps until the next drafted step
    int64_t since = 0;
    while (++since < 100000 && !g.should_draft(1, p)) {
    }
    return since;
  };
  for (int64_t gap : gaps) {
    EXPECT_EQ(next_probe(), gap);
    g.observe(0.0005, 1.6, 1.0);
  }
  EXPECT_EQ(next_probe(), lucky_gap);
  g.observe(0.0005, 8.0, 1.0);  // a lucky probe: drafting pays again by the means
  EXPECT_TRUE(g.should_draft(1, p));
  g.observe(0.0005, 1.0, 1.0);
  int drafted = 0;
  while (drafted < 8 && g.should_draft(1, p)) {  // ... until it does not
    g.observe(0.0005, 1.0, 1.0);
    ++drafted;
  }
  EXPECT_LT(drafted, 8);
  return 1 + next_probe();  // the call that chose plain decoding was the interval's first step
}

// Such a probe halves the interval it was probed at instead of restarting the ramp from
// probe_every: at the longest interval (64x probe_every here, probes costing nothing) ...
TEST(SpeculationGovernor, AReturnToDraftingHalvesTheProbeInterval) {
  EXPECT_EQ(interval_after_a_lucky_probe({4, 8, 16, 32, 64, 128, 256}, 256), 128);
}

// ... and below it (the probe does not first double the interval).
TEST(SpeculationGovernor, AProbeThatTipsBackToDraftingHalvesItsInterval) {
  EXPECT_EQ(interval_after_a_lucky_probe({4, 8}, 16), 8);
}

// Measured forwards correct the SPS table per mode: plain steps running at half the table's speed
// halve plain decoding's predicted tokens/s, and verify forwards at the table's speed or better
// then turn the choice towards drafting; the correction is bounded (a table wrong by more than 2x
// is not silently replaced).
TEST(SpeculationGovernor, MeasuredForwardsCorrectTheTable) {
  SpsProfile p;
  p.steps_per_second = {1000, 900, 800, 700, 600, 500, 450, 400};
  SpeculationGovernor g(4);
  g.observe(0.0005, 1.0, 7.0);  // warm-up
  for (int64_t i = 0; i < SpeculationGovernor::kMinObserved; ++i)
    g.observe(0.0005, 2.0, 7.0);  // 2 tokens in 0.5 + 2.5 ms: below 1 token per ms
  EXPECT_LT(g.predicted_spec(1, p), g.predicted_plain(1, p));
  g.observe_forward(false, 1, 1, 0.002, p);  // warm-up of the plain mode: not counted
  EXPECT_DOUBLE_EQ(g.kappa(false), 1.0);
  for (int i = 0; i < 4; ++i) g.observe_forward(false, 1, 1, 0.002, p);  // 2 ms per plain token
  EXPECT_DOUBLE_EQ(g.kappa(false), 2.0);
  EXPECT_NEAR(g.predicted_plain(1, p), 500.0, 1e-9);
  EXPECT_DOUBLE_EQ(g.kappa(true), 2.0);  // verify forwards not measured yet: as slow as plain ones
  EXPECT_LT(g.predicted_spec(1, p), g.predicted_plain(1, p));
  // Verify forwards twice as fast as the table: spec's forward share halves.
  g.observe_forward(true, 8, 1, 0.00125, p);
  g.observe_forward(true, 8, 1, 0.00125, p);
  EXPECT_DOUBLE_EQ(g.kappa(true), 0.5);
  EXPECT_GT(g.predicted_spec(1, p), g.predicted_plain(1, p));
  // Far off: clamped.
  for (int i = 0; i < 40; ++i) g.observe_forward(false, 1, 1, 1.0, p);
  EXPECT_NEAR(g.kappa(false), 2.0, 1e-9);
}

// A mode with no measured forward yet takes the other mode's correction: a host twice as fast as
// its table, seen only through drafted steps, is twice as fast for plain decoding too.
TEST(SpeculationGovernor, AnUnmeasuredModeBorrowsTheOthersCorrection) {
  SpsProfile p;
  p.steps_per_second = {1000, 900, 800, 700, 600, 500, 450, 400};
  SpeculationGovernor g(4);
  g.observe_forward(true, 8, 1, 0.00125, p);  // warm-up
  g.observe_forward(true, 8, 1, 0.00125, p);  // verify of 8 at twice the table's speed
  EXPECT_DOUBLE_EQ(g.kappa(true), 0.5);
  EXPECT_DOUBLE_EQ(g.kappa(false), 0.5);
  EXPECT_NEAR(g.predicted_plain(1, p), 2000.0, 1e-9);
  // Once plain forwards are measured, each mode has its own.
  g.observe_forward(false, 1, 1, 0.001, p);  // warm-up of the plain mode
  g.observe_forward(false, 1, 1, 0.001, p);
  EXPECT_DOUBLE_EQ(g.kappa(false), 1.0);
  EXPECT_DOUBLE_EQ(g.kappa(true), 0.5);
}

// Auto verification with a drafter that never pays: the engine decodes plainly (probing now and
// then) and the output is still the single-request output.
TEST_F(EngineFixture, AutoFallsBackToPlainDecodingWhenDraftingDoesNotPay) {
  DrafterFactory factory({drafter_dir, "", ""}, *target);
  SpsProfile sps;
  sps.steps_per_second = {1e6, 1e3, 1e3, 1e3, 1e3};  // verifying any draft costs 1000x one token
  sps.batch = {{1e6, 1e3, 1e3, 1e3, 1e3}};
  SpecOptions base;
  base.eos_ids = {3};
  base.verify = VerifyMode::Auto;
  base.sps = &sps;
  EngineOptions eo;
  eo.slots = 2;
  Engine engine(*target, factory, base, eo);
  std::vector<std::shared_ptr<RequestState>> states;
  for (int i = 0; i < 2; ++i) {
    GenerationRequest r;
    r.prompt = random_prompt(6, 300 + i);
    r.max_new_tokens = 40;
    states.push_back(engine.submit(r));
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(states[i]->wait(std::chrono::seconds(60)));
    EXPECT_EQ(states[i]->result().tokens, alone(DrafterFactory({}, *target), random_prompt(6, 300 + i), 40).tokens);
  }
  const EngineCounters c = engine.counters();
  EXPECT_GT(c.plain_steps, c.steps / 2);
}

}  // namespace
}  // namespace dspark
