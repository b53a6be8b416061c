#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_config.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dspark {

namespace {

// All tokens become one string of raw bytes. A token with a character outside the byte-level
// alphabet (typically an added token such as "<|im_start|>" with non-ASCII text) is taken as is.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      if (auto decoded = byte_level::decode(token)) {
        bytes += *decoded;
      } else {
        bytes += token;
      }
    }
    tokens.assign(1, std::move(bytes));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = pattern_.replace_all(token, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Runs of "<0xXX>" tokens become the bytes they name (kept raw, see decoder.h).
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    bool previous_was_byte = false;
    for (std::string& token : tokens) {
      if (const int byte = parse_byte(token); byte >= 0) {
        if (!previous_was_byte) out.emplace_back();
        out.back() += static_cast<char>(byte);
        previous_was_byte = true;
      } else {
        out.push_back(std::move(token));
        previous_was_byte = false;
      }
    }
    tokens = std::move(out);
  }

 private:
  static int parse_byte(const std::string& token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
    int value = 0;
    for (int i = 3; i < 5; ++i) {
      const char c = token[i];
      value *= 16;
      if (c >= '0' && c <= '9')
        value += c - '0';
      else if (c >= 'A' && c <= 'F')
        value += c - 'A' + 10;
      else if (c >= 'a' && c <= 'f')
        value += c - 'a' + 10;
      else
        return -1;
    }
    return value;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from every token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::string_view view = token;
      for (size_t i = 0; i < start_ && view.starts_with(content_); ++i)
        view.remove_prefix(content_.size());
      for (size_t i = 0; i < stop_ && view.ends_with(content_); ++i)
        view.remove_suffix(content_.size());
      token = std::string(view);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

// "▁" -> " ", except that in the first token every "▁" is dropped (that is what HF does; it
// removes the space the pre-tokenizer prepended).
class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(Pattern::literal(std::move(replacement))), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = replacement_.replace_all(tokens[i], i == 0 && strip_first_ ? "" : " ");
  }

 private:
  Pattern replacement_;
  bool strip_first_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

std::string single_char(const nlohmann::json& config, const char* key, const char* fallback,
                        std::string_view where) {
  std::string value = json_string_or(config, key, fallback);
  if (utf8::length(value) != 1) fail("{}: '{}' must be one character", where, key);
  return value;
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& config) {
  if (config.is_null()) return nullptr;
  const std::string type = json_string(config, "type", "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(json_pattern(config, "decoder Replace"),
                                            json_string(config, "content", "decoder Replace"));
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(single_char(config, "content", " ", "decoder Strip"),
                                          config.value("start", size_t(0)),
                                          config.value("stop", size_t(0)));
  }
  if (type == "Metaspace") {
    bool strip_first = config.value("add_prefix_space", true);
    const std::string scheme = json_string_or(config, "prepend_scheme", "");
    if (!scheme.empty()) strip_first = scheme != "never";
    return std::make_unique<MetaspaceDecoder>(
        single_char(config, "replacement", "\u2581", "decoder Metaspace"), strip_first);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const auto& step : json_array(config, "decoders", "decoder Sequence")) {
      if (auto d = make_decoder(step)) steps.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  fail("unsupported decoder type '{}'", type);
}

}  // namespace dspark
