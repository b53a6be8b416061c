// Unit tests of the tokenizer pieces on small hand-made inputs: UTF-8 and NFC helpers, the
// byte-level alphabet, BPE merge order, split behaviors, added-token options, post-processing,
// streaming, and Tokenizer::load's errors and BOS/EOS resolution.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// UTF-8

TEST(TokenizerUtf8, CompletePrefixHoldsBackOnlyAnUnfinishedCharacter) {
  EXPECT_EQ(utf8::complete_prefix_length("abc"), 3u);
  EXPECT_EQ(utf8::complete_prefix_length(""), 0u);
  EXPECT_EQ(utf8::complete_prefix_length("a\xC3"), 1u);              // é cut after its lead byte
  EXPECT_EQ(utf8::complete_prefix_length("a\xC3\xA9"), 3u);          // é complete
  EXPECT_EQ(utf8::complete_prefix_length("a\xF0\x9F\xA4"), 1u);      // 🤗 missing its last byte
  EXPECT_EQ(utf8::complete_prefix_length("a\xF0\x9F\xA4\x97"), 5u);  // 🤗 complete
  EXPECT_EQ(utf8::complete_prefix_length("a\x80"), 2u);              // stray continuation: invalid
  EXPECT_EQ(utf8::complete_prefix_length("a\xE0\x80"), 3u);          // can never become valid
  EXPECT_EQ(utf8::complete_prefix_length("a\xFF"), 2u);
}

TEST(TokenizerUtf8, DecoderIsStrict) {
  EXPECT_EQ(utf8::next("\xC0\xAF", 0).cp, utf8::kInvalid);          // overlong '/'
  EXPECT_EQ(utf8::next("\xED\xA0\x80", 0).cp, utf8::kInvalid);      // surrogate
  EXPECT_EQ(utf8::next("\xF4\x90\x80\x80", 0).cp, utf8::kInvalid);  // > U+10FFFF
  EXPECT_EQ(utf8::next("\xE2\x82\xAC", 0).cp, char32_t(0x20AC));
  EXPECT_EQ(utf8::sanitize("a\xFF"
                           "b\xC3"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_TRUE(utf8::is_valid("héllo 🤗"));
  EXPECT_FALSE(utf8::is_valid("h\xC3llo"));
}

// ---------------------------------------------------------------------------------------------
// NFC

TEST(TokenizerNfc, ComposesReordersAndRespectsExclusions) {
  EXPECT_EQ(nfc("e\u0301"), "\u00E9");
  EXPECT_EQ(nfc("cafe\u0301 ok"), "caf\u00E9 ok");
  EXPECT_EQ(nfc("\u1100\u1161\u11A8"), "\uAC01");    // Hangul L V T -> syllable
  EXPECT_EQ(nfc("\uAC00\u11A8"), "\uAC01");          // LV + T
  EXPECT_EQ(nfc("\u1E0B\u0323"), "\u1E0D\u0307");    // reordering, then composition
  EXPECT_EQ(nfc("q\u0307\u0323"), "q\u0323\u0307");  // reordering only
  EXPECT_EQ(nfc("\u212B"), "\u00C5");                // singleton (Angstrom sign)
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093C");          // composition exclusion
  EXPECT_EQ(nfc("a\u0308\u0301"), "\u00E4\u0301");   // second mark not composable
  EXPECT_EQ(nfc("\u0301a"), "\u0301a");              // leading mark stays
  EXPECT_EQ(nfc("plain ASCII text"), "plain ASCII text");
  EXPECT_EQ(nfc("\xFF"
                "e\u0301"),
            "\xFF"
            "\u00E9");  // ill-formed byte passes through
  EXPECT_TRUE(nfc_quick_check("already \u00E9 composed 中文"));
  EXPECT_FALSE(nfc_quick_check("e\u0301"));
}

// ---------------------------------------------------------------------------------------------
// Byte-level alphabet

TEST(TokenizerByteLevel, MatchesGpt2Alphabet) {
  EXPECT_EQ(byte_level::byte_to_char(' '), char32_t(0x120));   // "Ġ"
  EXPECT_EQ(byte_level::byte_to_char('\n'), char32_t(0x10A));  // "Ċ"
  EXPECT_EQ(byte_level::byte_to_char('A'), char32_t('A'));
  EXPECT_EQ(byte_level::byte_to_char(0xAD), char32_t(0x143));
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(byte_level::decode(byte_level::encode(all)), all);
  EXPECT_EQ(byte_level::decode("中"), std::nullopt);  // not an alphabet character
}

// ---------------------------------------------------------------------------------------------
// Small synthetic tokenizer.json documents.

// A byte-level BPE like GPT-2's: all 256 byte tokens, then the given merged tokens and merges.
json byte_level_doc(const std::vector<std::string>& merges, json added = json::array()) {
  json vocab = json::object();
  int next = 0;
  for (int b = 0; b < 256; ++b) vocab[byte_level::encode(std::string(1, char(b)))] = next++;
  json merge_list = json::array();
  for (const auto& m : merges) {
    const auto space = m.find(' ');
    const std::string merged = m.substr(0, space) + m.substr(space + 1);
    if (!vocab.contains(merged)) vocab[merged] = next++;
    merge_list.push_back(m);
  }
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}}};
}

std::vector<std::string> tokens_of(const Tokenizer& t, const std::vector<TokenId>& ids) {
  std::vector<std::string> out;
  for (TokenId id : ids) out.push_back(t.id_to_token(id));
  return out;
}

TEST(TokenizerBpe, AppliesMergesByRankNotByPosition) {
  // "b c" outranks "a b", so "abc" -> a + bc -> abc (not ab + c).
  HfTokenizer t(byte_level_doc({"b c", "a bc", "a b"}));
  EXPECT_EQ(tokens_of(t, t.encode("abc")), std::vector<std::string>{"abc"});
  HfTokenizer u(byte_level_doc({"a b", "b c"}));
  EXPECT_EQ(tokens_of(u, u.encode("abc")), (std::vector<std::string>{"ab", "c"}));
  // Equal ranks go left to right: "aaa" -> aa + a.
  HfTokenizer v(byte_level_doc({"a a"}));
  EXPECT_EQ(tokens_of(v, v.encode("aaa")), (std::vector<std::string>{"aa", "a"}));
  EXPECT_EQ(tokens_of(v, v.encode("aaaa")), (std::vector<std::string>{"aa", "aa"}));
}

TEST(TokenizerBpe, MergesMayBePairs) {
  json doc = byte_level_doc({"b c", "a bc"});
  doc["model"]["merges"] = json::array({json::array({"b", "c"}), json::array({"a", "bc"})});
  HfTokenizer t(doc);
  EXPECT_EQ(tokens_of(t, t.encode("abc")), std::vector<std::string>{"abc"});
}

TEST(TokenizerBpe, IgnoreMergesTakesWholeWordsFromTheVocab) {
  // "abc" is in the vocab but no merge sequence reaches it from a, b, c.
  json doc = byte_level_doc({"a b"});
  doc["model"]["vocab"]["abc"] = 1000;
  HfTokenizer without(doc);
  EXPECT_EQ(tokens_of(without, without.encode("abc")), (std::vector<std::string>{"ab", "c"}));
  doc["model"]["ignore_merges"] = true;
  HfTokenizer with(doc);
  EXPECT_EQ(with.encode("abc"), std::vector<TokenId>{1000});
}

TEST(TokenizerBpe, ByteLevelRoundTripsArbitraryBytes) {
  HfTokenizer t(byte_level_doc({"Ġ t", "h e", "Ġt he"}));
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);  // mostly ill-formed UTF-8
    EXPECT_EQ(t.decode(t.encode(bytes)), bytes);
  }
  EXPECT_EQ(tokens_of(t, t.encode("the the")), (std::vector<std::string>{"t", "he", "Ġthe"}));
}

TEST(TokenizerBpe, BadMergeIsAnError) {
  json doc = byte_level_doc({});
  doc["model"]["merges"] = json::array({"a nothere"});
  EXPECT_THROW(HfTokenizer{doc}, Error);
}

// A tokenizer whose words are whole vocab entries, to observe how text is split.
json word_doc(json pre_tokenizer, const std::vector<std::string>& words) {
  json vocab = json::object();
  for (size_t i = 0; i < words.size(); ++i) vocab[words[i]] = i;
  return {{"model",
           {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"ignore_merges", true}}},
          {"pre_tokenizer", pre_tokenizer}};
}

TEST(TokenizerPreTokenizer, SplitBehaviors) {
  const std::vector<std::string> words = {"a", "b", "c", "-", "--", "a-", "b-", "-b", "-c"};
  auto split = [&](const char* behavior, bool invert = false) {
    HfTokenizer t(word_doc({{"type", "Split"},
                            {"pattern", {{"String", "-"}}},
                            {"behavior", behavior},
                            {"invert", invert}},
                           words));
    return tokens_of(t, t.encode("a-b--c"));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Removed"), (V{"a", "b", "c"}));
  EXPECT_EQ(split("Isolated"), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split("MergedWithPrevious"), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split("MergedWithNext"), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(split("Contiguous"), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(split("Removed", true), (V{"-", "-", "-"}));
}

TEST(TokenizerPreTokenizer, RegexWithNegativeLookahead) {
  // "\s+(?!\S)" leaves the last space of a run to the following word, as GPT-2 does.
  HfTokenizer t(word_doc({{"type", "Split"},
                          {"pattern", {{"Regex", R"( ?\p{L}+|\s+(?!\S)|\s+)"}}},
                          {"behavior", "Isolated"}},
                         {"a", " b", "  ", " ", "\n"}));
  EXPECT_EQ(tokens_of(t, t.encode("a   b ")), (std::vector<std::string>{"a", "  ", " b", " "}));
}

TEST(TokenizerPreTokenizer, MetaspaceAndItsDecoder) {
  json doc = word_doc({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}},
                      {"▁Hey", "▁friend!", "▁", "<sep>", "x"});
  doc["added_tokens"] = json::array({{{"id", 3}, {"content", "<sep>"}, {"special", true}}});
  doc["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}};
  HfTokenizer t(doc);
  EXPECT_EQ(tokens_of(t, t.encode("Hey friend!")), (std::vector<std::string>{"▁Hey", "▁friend!"}));
  // "first": only the start of the text gets a "▁", not the text after an added token.
  EXPECT_EQ(tokens_of(t, t.encode("Hey<sep>x")), (std::vector<std::string>{"▁Hey", "<sep>", "x"}));
  EXPECT_EQ(t.decode(t.encode("Hey friend!")), "Hey friend!");
}

// ---------------------------------------------------------------------------------------------
// Added tokens and post-processing

TEST(TokenizerAddedTokens, LongestMatchStripAndSingleWord) {
  json added = json::array({
      {{"id", 300}, {"content", "<a>"}, {"special", true}},
      {{"id", 301}, {"content", "<a><b>"}, {"special", true}},
      {{"id", 302}, {"content", "<mask>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
      {{"id", 303},
       {"content", "cat"},
       {"special", false},
       {"single_word", true},
       {"normalized", false}},
  });
  HfTokenizer t(byte_level_doc({}, added));
  const auto ids = [&](const std::string& text) { return t.encode(text); };
  EXPECT_EQ(ids("<a><b>"), std::vector<TokenId>{301});  // longest match wins
  EXPECT_EQ(ids("<a>"), std::vector<TokenId>{300});
  // lstrip/rstrip swallow the spaces around <mask>.
  const auto masked = ids("x  <mask>  y");
  EXPECT_EQ(masked, (std::vector<TokenId>{'x', 302, 'y'}));
  // single_word: "cat" alone is the token, inside "concatenate" it is not.
  EXPECT_EQ(ids("cat"), std::vector<TokenId>{303});
  const auto inside = ids("concatenate");
  EXPECT_EQ(std::count(inside.begin(), inside.end(), 303), 0);
  EXPECT_TRUE(t.is_special(300));
  EXPECT_FALSE(t.is_special(303));
  EXPECT_EQ(t.decode({'x', 300, 'y'}, false), "x<a>y");
  EXPECT_EQ(t.decode({'x', 300, 'y'}, true), "xy");
  EXPECT_EQ(t.token_to_id("<mask>"), 302);
  EXPECT_EQ(t.vocab_size(), 304);
}

TEST(TokenizerPostProcessor, TemplateAddsBosAndEos) {
  json added = json::array({{{"id", 256}, {"content", "<s>"}, {"special", true}},
                            {{"id", 257}, {"content", "</s>"}, {"special", true}}});
  json doc = byte_level_doc({}, added);
  doc["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                              {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}},
        {"</s>", {{"id", "</s>"}, {"ids", {257}}, {"tokens", {"</s>"}}}}}}};
  HfTokenizer t(doc);
  EXPECT_EQ(t.encode("a", true), (std::vector<TokenId>{256, 'a', 257}));
  EXPECT_EQ(t.encode("a", false), std::vector<TokenId>{'a'});
  EXPECT_EQ(t.template_bos(), 256);
}

// ---------------------------------------------------------------------------------------------
// Streaming

TEST(TokenizerStreamingDecoder, HoldsBackSplitCharacters) {
  HfTokenizer t(byte_level_doc({}));
  // "é🤗" as single-byte tokens: nothing comes out until each character is complete.
  const auto ids = t.encode("\xC3\xA9\xF0\x9F\xA4\x97!");
  ASSERT_EQ(ids.size(), 7u);
  StreamingDecoder stream(t);
  EXPECT_EQ(stream.push(ids[0]), "");
  EXPECT_EQ(stream.push(ids[1]), "\xC3\xA9");
  EXPECT_EQ(stream.push(ids[2]), "");
  EXPECT_EQ(stream.push(ids[3]), "");
  EXPECT_EQ(stream.push(ids[4]), "");
  EXPECT_EQ(stream.push(ids[5]), "\xF0\x9F\xA4\x97");
  EXPECT_EQ(stream.push(ids[6]), "!");
  EXPECT_EQ(stream.flush(), "");
  // An unfinished character at the end comes out as U+FFFD.
  StreamingDecoder cut(t);
  EXPECT_EQ(cut.push(ids[2]), "");
  EXPECT_EQ(cut.flush(), "\xEF\xBF\xBD");
}

TEST(TokenizerStreamingDecoder, LongStreamsStayLinear) {
  HfTokenizer t(byte_level_doc({"h e", "l l", "Ġ w"}));
  std::string text;
  for (int i = 0; i < 4000; ++i) text += "hello wörld 🤗 ";
  const auto ids = t.encode(text);
  ASSERT_GT(ids.size(), 40000u);
  const auto start = std::chrono::steady_clock::now();
  StreamingDecoder stream(t);
  std::string out;
  for (TokenId id : ids) out += stream.push(id);
  out += stream.flush();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out, text);
  // Re-decoding everything on each push would take minutes here.
  EXPECT_LT(seconds, 5.0);
}

// ---------------------------------------------------------------------------------------------
// Tokenizer::load

class TokenizerLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dspark_tok_load_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
  }
  // Runs load and returns the error message (fails the test if there is none).
  std::string load_error(const std::string& path) {
    try {
      Tokenizer::load(path);
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
      return message;
    }
    ADD_FAILURE() << "load(" << path << ") did not fail";
    return "";
  }
  fs::path dir_;
};

TEST_F(TokenizerLoadTest, MissingPathNamesIt) {
  const std::string missing = (dir_ / "nope").string();
  EXPECT_NE(load_error(missing).find(missing), std::string::npos);
}

TEST_F(TokenizerLoadTest, DirectoryWithoutTokenizer) {
  const std::string message = load_error(dir_.string());
  EXPECT_NE(message.find("no tokenizer.json or tokenizer.model"), std::string::npos) << message;
  EXPECT_NE(message.find(dir_.string()), std::string::npos) << message;
}

TEST_F(TokenizerLoadTest, CorruptJsonNamesTheFile) {
  write("tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  const std::string message = load_error(dir_.string());
  EXPECT_NE(message.find((dir_ / "tokenizer.json").string()), std::string::npos) << message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

TEST_F(TokenizerLoadTest, UnsupportedPiecesAreNamed) {
  json doc = byte_level_doc({});
  doc["model"]["type"] = "WordPiece";
  write("tokenizer.json", doc.dump());
  std::string message = load_error(dir_.string());
  EXPECT_NE(message.find("unsupported model type 'WordPiece'"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;

  doc = byte_level_doc({});
  doc["normalizer"] = {{"type", "NFKD"}};
  write("tokenizer.json", doc.dump());
  message = load_error(dir_.string());
  EXPECT_NE(message.find("unsupported normalizer type 'NFKD'"), std::string::npos) << message;

  doc = byte_level_doc({"a b"});
  doc["model"]["merges"] = json::array({"a b c"});
  write("tokenizer.json", doc.dump());
  message = load_error(dir_.string());
  EXPECT_NE(message.find("merge 'a b c'"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;

  write("tokenizer.json", "[1, 2]");
  EXPECT_NE(load_error(dir_.string()).find("tokenizer.json"), std::string::npos);
}

TEST_F(TokenizerLoadTest, CorruptConfigNamesTheFile) {
  write("tokenizer.json", byte_level_doc({}).dump());
  write("generation_config.json", "{ not json");
  const std::string message = load_error(dir_.string());
  EXPECT_NE(message.find("generation_config.json"), std::string::npos) << message;
}

TEST_F(TokenizerLoadTest, EosAndBosFromConfigFiles) {
  json added = json::array({{{"id", 256}, {"content", "<|begin|>"}, {"special", true}},
                            {{"id", 257}, {"content", "<|end|>"}, {"special", true}},
                            {{"id", 258}, {"content", "<|eot|>"}, {"special", true}}});
  write("tokenizer.json", byte_level_doc({}, added).dump());
  write("generation_config.json", R"({"eos_token_id": [258, 257], "bos_token_id": 256})");
  write("config.json", R"({"eos_token_id": 257, "bos_token_id": 256})");
  write("tokenizer_config.json",
        R"({"eos_token": {"content": "<|end|>"}, "bos_token": "<|begin|>"})");
  const auto t = Tokenizer::load(dir_.string());
  EXPECT_EQ(t->eos_ids(), (std::vector<TokenId>{258, 257}));
  EXPECT_EQ(t->bos_id(), 256);

  // tokenizer_config.json's "bos_token": null means no BOS, whatever config.json says (Qwen).
  write("tokenizer_config.json", R"({"bos_token": null, "eos_token": "<|eot|>"})");
  write("generation_config.json", R"({"eos_token_id": 257})");
  const auto u = Tokenizer::load((dir_ / "tokenizer.json").string());
  EXPECT_EQ(u->bos_id(), std::nullopt);
  EXPECT_EQ(u->eos_ids(), (std::vector<TokenId>{257, 258}));

  write("tokenizer_config.json", R"({"eos_token": "<|not a token|>"})");
  EXPECT_NE(load_error(dir_.string()).find("<|not a token|>"), std::string::npos);
}

TEST_F(TokenizerLoadTest, PrefersTokenizerJsonOverModel) {
  write("tokenizer.json", byte_level_doc({"a b"}).dump());
  write("tokenizer.model", "not a sentencepiece model");  // would fail if it were read
  const auto t = Tokenizer::load(dir_.string());
  EXPECT_EQ(t->encode("ab").size(), 1u);
}

}  // namespace
}  // namespace dspark
