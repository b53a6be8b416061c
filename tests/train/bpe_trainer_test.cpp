// BPE trainer: the tokenizer it writes round-trips every byte sequence through the engine's own
// loader, and encodes exactly as the learned merges say (checked against a naive merge loop).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>

#include "support/tiny_models.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "train/bpe_trainer.h"
#include "util/error.h"

namespace dspark {
namespace {

const char* kText =
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n"
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
    "    def norm(self):\n        return (self.x ** 2 + self.y ** 2) ** 0.5\n"
    "# caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac 123 456\n";

ByteLevelBpe train_small(int64_t vocab) {
  BpeTrainer trainer({vocab, {"<|endoftext|>"}, 2});
  for (int i = 0; i < 3; ++i) trainer.add_text(kText);
  return trainer.train();
}

std::string write_small(const ByteLevelBpe& bpe) {
  const std::string dir = testing::temp_dir("bpe_trainer");
  write_tokenizer_json(dir + "/tokenizer.json", bpe);
  return dir;
}

// Reference encoder: for each pre-token, repeatedly apply the earliest-learned merge present.
std::vector<TokenId> naive_encode(const ByteLevelBpe& bpe, const std::string& text) {
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t i = 0; i < bpe.merges.size(); ++i) rank[bpe.merges[i]] = i;
  std::map<std::string, TokenId> id;
  for (size_t i = 0; i < bpe.tokens.size(); ++i) id[bpe.tokens[i]] = TokenId(i);
  Regex split(byte_level_split_pattern());
  std::vector<TokenId> out;
  for (auto [b, e] : split.find_all(text)) {
    std::vector<std::string> parts;
    for (size_t i = b; i < e; ++i) parts.push_back(std::string(1, text[i]));
    while (true) {
      size_t best = SIZE_MAX, at = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = rank.find({parts[i], parts[i + 1]});
        if (it != rank.end() && it->second < best) best = it->second, at = i;
      }
      if (best == SIZE_MAX) break;
      parts[at] += parts[at + 1];
      parts.erase(parts.begin() + at + 1);
    }
    for (auto& p : parts) out.push_back(id.at(p));
  }
  return out;
}

TEST(BpeTrainer, LearnsMergesUpToTheVocabularySize) {
  const ByteLevelBpe bpe = train_small(300);
  EXPECT_EQ(bpe.tokens.size() + bpe.special_tokens.size(), 300u);
  EXPECT_EQ(bpe.merges.size(), 300u - 257u);
  // The most frequent pair in indented code is two spaces.
  EXPECT_EQ(bpe.merges[0], std::make_pair(std::string(" "), std::string(" ")));
  // Every merged token is the concatenation of its merge.
  for (size_t i = 0; i < bpe.merges.size(); ++i)
    EXPECT_EQ(bpe.tokens[256 + i], bpe.merges[i].first + bpe.merges[i].second);
}

TEST(BpeTrainer, IsDeterministic) {
  const ByteLevelBpe a = train_small(290), b = train_small(290);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST(BpeTrainer, WrittenTokenizerRoundTripsEveryByteSequence) {
  const ByteLevelBpe bpe = train_small(300);
  auto tok = Tokenizer::load(write_small(bpe));
  EXPECT_EQ(tok->vocab_size(), 300);
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) all_bytes.push_back(char(c));
  std::vector<std::string> samples = {kText, all_bytes, std::string("\xff\xfe\x80 def", 7), "\n\n\n    \t x"};
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 40, '\0');
    for (auto& c : s) c = char(rng() % 256);
    samples.push_back(s);
  }
  for (const auto& s : samples) {
    const auto ids = tok->encode(s, false);
    EXPECT_EQ(tok->decode(ids), s);
  }
  EXPECT_LT(tok->encode(kText, false).size(), std::string(kText).size() / 2);
  const auto eot = tok->token_to_id("<|endoftext|>");
  ASSERT_TRUE(eot.has_value());
  EXPECT_EQ(*eot, 299);
  EXPECT_EQ(tok->encode("a<|endoftext|>b", false).at(1), 299);
}

TEST(BpeTrainer, LoadedTokenizerGivesTheIdsTheMergesDefine) {
  const ByteLevelBpe bpe = train_small(320);
  const std::string dir = write_small(bpe);
  auto first = Tokenizer::load(dir);
  auto second = Tokenizer::load(dir);
  for (const std::string& s : {std::string(kText), std::string("def norm(self, other):\n        return self.x\n")}) {
    const auto ids = first->encode(s, false);
    EXPECT_EQ(ids, naive_encode(bpe, s));
    EXPECT_EQ(ids, second->encode(s, false));
  }
}

TEST(BpeTrainer, RejectsTooSmallVocabulary) {
  EXPECT_THROW(BpeTrainer({200, {"<|endoftext|>"}, 2}), Error);
}

}  // namespace
}  // namespace dspark
