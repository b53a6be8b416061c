// SentencePiece tokenizer.model support. No npm package ships a tokenizer.model, so the test trains
// tiny models with the SentencePiece trainer library and checks that our wrapper agrees with the
// library's own processor.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "tokenizer/sentencepiece_library.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out;
    const char* seeds[] = {
        "The quick brown fox jumps over the lazy dog.",
        "Tokenizers turn text into token ids and back again.",
        "Hello world! This is a small corpus for a tiny SentencePiece model.",
        "Numbers like 12345 and 3.14159 appear too, as do dates: 2024-03-15.",
        "def tokenize(text):\n    return [ord(c) for c in text]",
        "Café, naïve, résumé and façade carry accents.",
        "Mixed scripts: Привет мир, γειά σου κόσμε.",
        "Short lines.",
        "Another line with some more common English words in it.",
    };
    for (int repeat = 0; repeat < 40; ++repeat)
      for (const char* s : seeds) out.push_back(std::string(s) + (repeat % 2 ? " again" : ""));
    return out;
  }();
  return lines;
}

// Removes the trained models when the test program ends.
struct TempDirs {
  std::vector<fs::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& dir : dirs) fs::remove_all(dir, ec);
  }
};
TempDirs temp_dirs;

// Trains a model into `dir`/tokenizer.model once per configuration.
fs::path train(const std::string& name, const std::string& options) {
  const fs::path dir = fs::temp_directory_path() / ("dspark_spm_test_" + name + "_" + std::to_string(::getpid()));
  if (fs::exists(dir / "tokenizer.model")) return dir;
  fs::create_directories(dir);
  temp_dirs.dirs.push_back(dir);
  {
    std::ofstream out(dir / "corpus.txt");
    for (const auto& line : corpus()) out << line << "\n";
  }
  const std::string args = "--input=" + (dir / "corpus.txt").string() + " --model_prefix=" +
                           (dir / "tokenizer").string() + " " + options +
                           " --minloglevel=2 --num_threads=1";
  SentencePieceModel::train(args);
  return dir;
}

const std::vector<std::string>& samples() {
  static const std::vector<std::string> texts = {
      "",
      "Hello world",
      " Hello world",
      "hello   world  ",
      "The quick brown fox.",
      "Numbers 12345 and 3.14159",
      "Café naïve",
      "Привет мир",
      "unseen characters: 中文 日本語 🤗 ∑",
      "line one\nline two\ttab",
      "def f(x):\n    return x",
      "  leading and trailing  ",
  };
  return texts;
}

fs::path train(const std::string& name) {
  return train(name, name == "bpe_byte_fallback"
                         ? "--model_type=bpe --vocab_size=420 --byte_fallback=true --character_coverage=0.98"
                         : "--model_type=unigram --vocab_size=120");
}

class SentencePieceTokenizerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = train(GetParam());
    processor_ = SentencePieceModel::load((dir_ / "tokenizer.model").string());
    tokenizer_ = Tokenizer::load(dir_.string());
  }
  fs::path dir_;
  std::unique_ptr<SentencePieceModel> processor_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(SentencePieceTokenizerTest, EncodeAgreesWithTheLibrary) {
  for (const auto& text : samples()) {
    std::vector<int> expected;
    expected = processor_->Encode(text);
    EXPECT_EQ(tokenizer_->encode(text), std::vector<TokenId>(expected.begin(), expected.end()))
        << text;
  }
}

TEST_P(SentencePieceTokenizerTest, DecodeAgreesWithTheLibrary) {
  for (const auto& text : samples()) {
    std::vector<int> ids;
    ids = processor_->Encode(text);
    const std::vector<TokenId> ours(ids.begin(), ids.end());
    // No control tokens here; <unk> (from the unigram model) shows as the library shows it.
    EXPECT_EQ(tokenizer_->decode(ours), processor_->DecodeIds(ids)) << text;
  }
}

TEST_P(SentencePieceTokenizerTest, SpecialTokensAndIds) {
  const auto bos = tokenizer_->bos_id();
  ASSERT_TRUE(bos.has_value());
  EXPECT_EQ(*bos, processor_->bos_id());
  EXPECT_EQ(tokenizer_->eos_ids(), std::vector<TokenId>{processor_->eos_id()});
  EXPECT_TRUE(tokenizer_->is_special(*bos));
  EXPECT_EQ(tokenizer_->vocab_size(), processor_->GetPieceSize());
  EXPECT_EQ(tokenizer_->token_to_id("<s>"), *bos);
  EXPECT_EQ(tokenizer_->token_to_id("definitely not a piece"), std::nullopt);

  // add_special prepends BOS; "<s>" / "</s>" written in the text are the control tokens.
  const auto with_bos = tokenizer_->encode("Hello", true);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos.front(), *bos);
  const auto ids = tokenizer_->encode("Hello</s>");
  EXPECT_EQ(ids.back(), processor_->eos_id());
  EXPECT_EQ(tokenizer_->decode(ids, false), "Hello</s>");
  EXPECT_EQ(tokenizer_->decode(ids, true), "Hello");
}

TEST_P(SentencePieceTokenizerTest, StreamingDecoderMatchesDecode) {
  for (const auto& text : samples()) {
    const auto ids = tokenizer_->encode(text, true);
    StreamingDecoder stream(*tokenizer_, true);
    std::string streamed;
    for (TokenId id : ids) {
      const std::string piece = stream.push(id);
      EXPECT_TRUE(utf8::is_valid(piece));
      streamed += piece;
    }
    streamed += stream.flush();
    EXPECT_EQ(streamed, utf8::sanitize(tokenizer_->decode(ids, true))) << text;
  }
}

TEST_P(SentencePieceTokenizerTest, LoadsTheModelFileDirectly) {
  const auto direct = Tokenizer::load((dir_ / "tokenizer.model").string());
  EXPECT_EQ(direct->encode("Hello world"), tokenizer_->encode("Hello world"));
}

INSTANTIATE_TEST_SUITE_P(Models, SentencePieceTokenizerTest,
                         ::testing::Values("bpe_byte_fallback", "unigram"),
                         [](const auto& info) { return info.param; });

TEST(SentencePieceTokenizerByteFallback, RoundTripsUnseenCharacters) {
  const auto dir = train("bpe_byte_fallback");
  auto processor = SentencePieceModel::load((dir / "tokenizer.model").string());
  const auto tokenizer = Tokenizer::load(dir.string());
  for (const auto& text : samples()) {
    // The library's normalization (nmt_nfkc: folds runs of spaces, trims the ends) is not undone
    // by either side, so compare with the library's own round trip.
    std::vector<int> ids;
    ids = processor->Encode(text);
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(text)), processor->DecodeIds(ids)) << text;
  }
  // Characters the model has never seen come back byte for byte, via <0xXX> pieces.
  const auto ids = tokenizer->encode("中文 🤗");
  EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [&](TokenId id) {
    return tokenizer->id_to_token(id).starts_with("<0x");
  }));
  EXPECT_EQ(tokenizer->decode(ids), "中文 🤗");
}

TEST(SentencePieceTokenizerLoad, CorruptModelNamesTheFile) {
  const fs::path dir = fs::temp_directory_path() / ("dspark_spm_corrupt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.model") << "this is not a protobuf";
  try {
    Tokenizer::load(dir.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find((dir / "tokenizer.model").string()), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dspark
