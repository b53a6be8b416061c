#include "tokenizer/normalizer.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/json_config.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_nfc.h"
#include "util/error.h"

namespace dspark {

namespace {

class NfcNormalizer : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return nfc(text); }
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string_view text) const override {
    return pattern_.replace_all(text, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  // HF leaves empty text alone, so an added token at the very end gets no stray "▁".
  std::string normalize(std::string_view text) const override {
    return text.empty() ? std::string() : prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

// Strips Unicode whitespace at either end.
class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view text) const override {
    static const Regex leading("^\\s+"), trailing("\\s+$");
    std::string_view out = text;
    if (right_) {
      if (auto m = trailing.find_all(out); !m.empty()) out = out.substr(0, m.back().first);
    }
    if (left_) {
      if (auto m = leading.find_all(out); !m.empty()) out = out.substr(m.front().second);
    }
    return std::string(out);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string normalize(std::string_view text) const override {
    std::string out(text);
    for (const auto& step : steps_) out = step->normalize(out);
    return out;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config) {
  if (config.is_null()) return nullptr;
  const std::string type = json_string(config, "type", "normalizer");
  if (type == "NFC") return std::make_unique<NfcNormalizer>();
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(
        json_pattern(config, "normalizer Replace"),
        json_string(config, "content", "normalizer Replace"));
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(
        json_string(config, "prepend", "normalizer Prepend"));
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(config.value("strip_left", true),
                                             config.value("strip_right", true));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& step : json_array(config, "normalizers", "normalizer Sequence")) {
      if (auto n = make_normalizer(step)) steps.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  fail("unsupported normalizer type '{}'", type);
}

}  // namespace dspark
