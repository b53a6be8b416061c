// The forward pass: incremental decoding through the KV cache, ragged batching, rollback, taps.
#include <gtest/gtest.h>
#include <random>
#include <torch/torch.h>

#include "support/tiny_models.h"
#include "util/error.h"

namespace dspark {
namespace {

using testing::tiny_model;

std::vector<int64_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> out(n);
  for (auto& t : out) t = int64_t(rng() % uint64_t(vocab));
  return out;
}

// Tolerance for comparing logits computed along different paths (different matmul shapes):
// fp32 rounding is ~1e-6 relative; bf16 has 8 mantissa bits and the paths round at different
// points (3 layers of random weights with std 0.2 amplify that), so allow 6% of the largest
// |logit|. Measured: at most ~4% across architectures; a wrong mask or RoPE offset gives ~100%.
// Gemma4 attends with scaling 1 over RMS-normed q and k, so its scores reach ~D, where bf16's
// spacing is 1/8 to 1/4: either bf16 path is ~11% of the largest |logit| from float32 (measured)
// and the two ~15% from each other; allow 25% there.
double tolerance(c10::ScalarType dtype, const at::Tensor& reference, const std::string& kind = "") {
  const double scale = reference.abs().max().item<double>();
  if (dtype == torch::kFloat32) return 1e-4 * std::max(1.0, scale);
  return (kind == "gemma4" ? 0.25 : 0.06) * std::max(1.0, scale);
}

struct ArchDtype {
  std::string kind;
  c10::ScalarType dtype;
};

class TransformerTest : public ::testing::TestWithParam<ArchDtype> {};

TEST_P(TransformerTest, IncrementalDecodingMatchesFullForward) {
  auto model = tiny_model(GetParam().kind, GetParam().dtype);
  const int64_t T = 13;  // longer than the sliding window (5) so the window matters
  auto tokens = random_tokens(T, model->config().vocab_size, 7);
  at::Tensor full = model->forward_full(torch::tensor(tokens).unsqueeze(0))[0];  // [T, V]

  // Prefill 4, then a chunk of 3, then one token at a time.
  KVCache cache = model->new_cache();
  std::vector<at::Tensor> pieces;
  pieces.push_back(model->forward(cache, {tokens.begin(), tokens.begin() + 4}, LogitsAt::All).logits);
  pieces.push_back(model->forward(cache, {tokens.begin() + 4, tokens.begin() + 7}, LogitsAt::All).logits);
  for (int64_t t = 7; t < T; ++t) pieces.push_back(model->forward(cache, {tokens[t]}, LogitsAt::All).logits);
  at::Tensor incremental = torch::cat(pieces, 0);
  EXPECT_EQ(cache.length(), T);
  ASSERT_EQ(incremental.sizes(), full.sizes());
  const double max_diff = (incremental - full).abs().max().item<double>();
  EXPECT_LE(max_diff, tolerance(GetParam().dtype, full, GetParam().kind)) << GetParam().kind;
}

TEST_P(TransformerTest, RaggedBatchMatchesSequencesAlone) {
  auto model = tiny_model(GetParam().kind, GetParam().dtype);
  const int64_t V = model->config().vocab_size;
  // Three sequences with different cache lengths and chunk lengths.
  std::vector<std::vector<int64_t>> prefixes = {random_tokens(3, V, 1), random_tokens(9, V, 2), random_tokens(1, V, 3)};
  std::vector<std::vector<int64_t>> chunks = {random_tokens(4, V, 4), random_tokens(1, V, 5), random_tokens(7, V, 6)};

  std::vector<at::Tensor> alone;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    KVCache cache = model->new_cache();
    model->forward(cache, prefixes[i], LogitsAt::None);
    alone.push_back(model->forward(cache, chunks[i], LogitsAt::All).logits);
  }
  std::vector<KVCache> caches;
  for (size_t i = 0; i < prefixes.size(); ++i) caches.push_back(model->new_cache());
  std::vector<SequenceChunk> prefill, step;
  for (size_t i = 0; i < prefixes.size(); ++i) prefill.push_back({&caches[i], prefixes[i], LogitsAt::None});
  model->forward(prefill);
  for (size_t i = 0; i < prefixes.size(); ++i) step.push_back({&caches[i], chunks[i], LogitsAt::All});
  auto batched = model->forward(step);
  for (size_t i = 0; i < prefixes.size(); ++i) {
    ASSERT_EQ(batched[i].logits.sizes(), alone[i].sizes());
    EXPECT_LE((batched[i].logits - alone[i]).abs().max().item<double>(), tolerance(GetParam().dtype, alone[i]))
        << GetParam().kind << " sequence " << i;
    EXPECT_EQ(caches[i].length(), int64_t(prefixes[i].size() + chunks[i].size()));
  }
}

TEST_P(TransformerTest, TruncateRollsBackExactly) {
  auto model = tiny_model(GetParam().kind, GetParam().dtype);
  const int64_t V = model->config().vocab_size;
  auto prefix = random_tokens(8, V, 11);
  auto rejected = random_tokens(5, V, 12);
  auto next = random_tokens(3, V, 13);

  KVCache fresh = model->new_cache();
  model->forward(fresh, prefix, LogitsAt::None);
  at::Tensor expected = model->forward(fresh, next, LogitsAt::All).logits;

  KVCache rolled = model->new_cache();
  model->forward(rolled, prefix, LogitsAt::None);
  model->forward(rolled, rejected, LogitsAt::All);  // a verify chunk whose drafts are rejected
  rolled.truncate(int64_t(prefix.size()));
  at::Tensor got = model->forward(rolled, next, LogitsAt::All).logits;
  // Same operations on the same data: identical, not just close.
  EXPECT_TRUE(torch::equal(got, expected)) << GetParam().kind;
}

TEST_P(TransformerTest, HiddenTapsAreConsistent) {
  auto model = tiny_model(GetParam().kind, GetParam().dtype);
  auto tokens = random_tokens(6, model->config().vocab_size, 21);
  KVCache cache = model->new_cache();
  HiddenTaps taps{{0, 2}, true};
  ChunkOutput out = model->forward(cache, tokens, LogitsAt::All, taps);
  const int64_t H = model->config().hidden_size;
  ASSERT_EQ(out.layer_hidden.sizes(), (std::vector<int64_t>{6, 2, H}));
  ASSERT_EQ(out.final_hidden.sizes(), (std::vector<int64_t>{6, H}));
  EXPECT_TRUE(torch::allclose(model->logits_from_final_hidden(out.final_hidden), out.logits));
  // Taps through forward_full agree with the cached path.
  std::vector<at::Tensor> layer_hidden;
  model->forward_full(torch::tensor(tokens).unsqueeze(0), taps, &layer_hidden);
  ASSERT_EQ(layer_hidden.size(), 2u);
  const at::Tensor a = out.layer_hidden.select(1, 1).to(torch::kFloat32);
  const at::Tensor b = layer_hidden[1][0].to(torch::kFloat32);
  EXPECT_LE((a - b).abs().max().item<double>(), tolerance(GetParam().dtype, b));
  // Only the last position's logits when asked for the last.
  KVCache cache2 = model->new_cache();
  ChunkOutput last = model->forward(cache2, tokens, LogitsAt::Last);
  ASSERT_EQ(last.logits.size(0), 1);
  EXPECT_TRUE(torch::allclose(last.logits[0], out.logits[5], 1e-5, 1e-5));
}

std::vector<ArchDtype> all_cases() {
  std::vector<ArchDtype> out;
  for (const auto& kind : testing::all_tiny_kinds())
    for (auto dtype : {torch::kFloat32, torch::kBFloat16}) out.push_back({kind, dtype});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, TransformerTest, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) {
                           return info.param.kind + (info.param.dtype == torch::kFloat32 ? "_f32" : "_bf16");
                         });

TEST(TransformerSlidingWindow, WindowChangesLaterLogitsOnly) {
  // The same Gemma3 weights with and without the window agree while positions fit the window
  // and differ after: the mask is really applied.
  ModelConfig windowed = parse_model_config(testing::tiny_config_json("gemma3", 97, 4), "windowed");
  ModelConfig wide = parse_model_config(testing::tiny_config_json("gemma3", 97, 1000), "wide");
  ModelWeights w = random_weights(windowed, torch::kFloat32, 5);
  Transformer a(windowed, w), b(wide, w);
  auto tokens = random_tokens(10, 97, 3);
  at::Tensor la = a.forward_full(torch::tensor(tokens).unsqueeze(0))[0];
  at::Tensor lb = b.forward_full(torch::tensor(tokens).unsqueeze(0))[0];
  EXPECT_TRUE(torch::allclose(la.narrow(0, 0, 4), lb.narrow(0, 0, 4), 1e-5, 1e-5));
  EXPECT_FALSE(torch::allclose(la.narrow(0, 4, 6), lb.narrow(0, 4, 6), 1e-3, 1e-3));
}

TEST(TransformerErrors, TokenOutsideVocabularyIsAClearError) {
  auto model = tiny_model("qwen3", torch::kFloat32);
  KVCache cache = model->new_cache();
  EXPECT_THROW(model->forward(cache, {5, 97}), Error);
  EXPECT_THROW(model->forward(cache, {-1}), Error);
}

TEST(TransformerErrors, ContextOverflowIsAClearError) {
  auto model = tiny_model("qwen3", torch::kFloat32);
  KVCache cache = model->new_cache();
  std::vector<int64_t> tokens(257, 3);
  EXPECT_THROW(model->forward(cache, tokens), Error);
}

}  // namespace
}  // namespace dspark
