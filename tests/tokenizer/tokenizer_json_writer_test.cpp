// A byte-level BPE written as tokenizer.json loads back through the engine's own loader.
#include <gtest/gtest.h>

#include <random>

#include "support/tiny_models.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json_writer.h"

namespace dspark {
namespace {

TEST(TokenizerJsonWriter, WrittenTokenizerLoadsAndRoundTrips) {
  ByteLevelBpe bpe;
  for (int b = 0; b < 256; ++b) bpe.tokens.push_back(std::string(1, char(b)));
  bpe.tokens.push_back(" d");    // 256
  bpe.tokens.push_back("ef");    // 257
  bpe.tokens.push_back(" def");  // 258
  bpe.merges = {{" ", "d"}, {"e", "f"}, {" d", "ef"}};
  bpe.special_tokens = {"<|endoftext|>"};  // 259
  const std::string dir = testing::temp_dir("tokenizer-writer");
  write_tokenizer_json(dir + "/tokenizer.json", bpe);
  auto tokenizer = Tokenizer::load(dir);
  EXPECT_EQ(tokenizer->vocab_size(), 260);
  EXPECT_EQ(tokenizer->encode("x def"), (std::vector<TokenId>{'x', 258}));
  EXPECT_EQ(tokenizer->encode("a<|endoftext|>"), (std::vector<TokenId>{'a', 259}));
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(size_t(rng() % 40), '\0');
    for (auto& c : bytes) c = char(rng() % 256);
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(bytes)), bytes);
  }
}

}  // namespace
}  // namespace dspark
