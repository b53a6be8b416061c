#include "tokenizer/pretokenizer.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_config.h"
#include "tokenizer/regex.h"
#include "util/error.h"

namespace dspark {

namespace {

// How the pieces a pattern matches ("delimiters") are kept, as HF's SplitDelimiterBehavior.
enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const std::string& name) {
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  fail("unsupported split behavior '{}'", name);
}

struct Range {
  size_t begin, end;
  bool delimiter;
};

// Splits `piece` at the matches of `pattern` and appends the parts to `out`.
void split_piece(const PreToken& piece, const Pattern& pattern, Behavior behavior, bool invert,
                 std::vector<PreToken>& out) {
  const std::string& text = piece.text;
  // Cover the whole text with alternating gap / match ranges.
  std::vector<Range> ranges;
  size_t last = 0;
  for (const auto& [begin, end] : pattern.find_all(text)) {
    if (begin > last) ranges.push_back({last, begin, invert});
    ranges.push_back({begin, end, !invert});
    last = end;
  }
  if (last < text.size()) ranges.push_back({last, text.size(), invert});

  std::vector<Range> parts;
  switch (behavior) {
    case Behavior::Removed:
      for (const Range& r : ranges)
        if (!r.delimiter) parts.push_back(r);
      break;
    case Behavior::Isolated:
      parts = ranges;
      break;
    case Behavior::MergedWithPrevious: {
      bool previous_delimiter = false;
      for (const Range& r : ranges) {
        if (r.delimiter && !previous_delimiter && !parts.empty())
          parts.back().end = r.end;
        else
          parts.push_back(r);
        previous_delimiter = r.delimiter;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      // Mirror image of MergedWithPrevious: walk backwards.
      bool next_delimiter = false;
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        if (it->delimiter && !next_delimiter && !parts.empty())
          parts.back().begin = it->begin;
        else
          parts.push_back(*it);
        next_delimiter = it->delimiter;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
    case Behavior::Contiguous: {
      bool previous_delimiter = false;
      for (const Range& r : ranges) {
        if (r.delimiter == previous_delimiter && !parts.empty())
          parts.back().end = r.end;
        else
          parts.push_back(r);
        previous_delimiter = r.delimiter;
      }
      break;
    }
  }
  for (const Range& r : parts) {
    if (r.end > r.begin)
      out.push_back({text.substr(r.begin, r.end - r.begin), piece.at_start && r.begin == 0});
  }
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    for (const PreToken& piece : pieces) split_piece(piece, pattern_, behavior_, invert_, out);
    pieces = std::move(out);
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's word pattern, used when ByteLevel has use_regex (no separate Split step).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        pattern_(use_regex ? std::make_unique<Pattern>(Pattern::regex(kGpt2Pattern)) : nullptr) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    for (PreToken& piece : pieces) {
      if (add_prefix_space_ && piece.text.front() != ' ') piece.text.insert(0, " ");
      if (pattern_) {
        split_piece(piece, *pattern_, Behavior::Isolated, false, out);
      } else {
        out.push_back(std::move(piece));
      }
    }
    for (PreToken& piece : out) piece.text = byte_level::encode(piece.text);
    pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pattern> pattern_;
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_(split),
        delimiter_(Pattern::literal(replacement_)),
        space_(Pattern::literal(" ")) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    for (PreToken& piece : pieces) {
      piece.text = space_.replace_all(piece.text, replacement_);
      const bool needs_prefix = piece.text.compare(0, replacement_.size(), replacement_) != 0;
      if (needs_prefix &&
          (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && piece.at_start)))
        piece.text.insert(0, replacement_);
      if (split_) {
        split_piece(piece, delimiter_, Behavior::MergedWithNext, false, out);
      } else {
        out.push_back(std::move(piece));
      }
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  Pattern delimiter_, space_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config) {
  if (config.is_null()) return nullptr;
  const std::string type = json_string(config, "type", "pre_tokenizer");
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(
        json_pattern(config, "pre_tokenizer Split"),
        parse_behavior(json_string(config, "behavior", "pre_tokenizer Split")),
        config.value("invert", false));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(config.value("add_prefix_space", true),
                                                   config.value("use_regex", true));
  }
  if (type == "Metaspace") {
    // Older files say add_prefix_space (true = "always") instead of prepend_scheme.
    PrependScheme scheme =
        config.value("add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
    const std::string name = json_string_or(config, "prepend_scheme", "");
    if (name == "always")
      scheme = PrependScheme::Always;
    else if (name == "first")
      scheme = PrependScheme::First;
    else if (name == "never")
      scheme = PrependScheme::Never;
    else if (!name.empty())
      fail("unsupported Metaspace prepend_scheme '{}'", name);
    return std::make_unique<MetaspacePreTokenizer>(json_string_or(config, "replacement", "\u2581"),
                                                   scheme, config.value("split", true));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& step : json_array(config, "pretokenizers", "pre_tokenizer Sequence")) {
      if (auto p = make_pre_tokenizer(step)) steps.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  fail("unsupported pre_tokenizer type '{}'", type);
}

}  // namespace dspark
