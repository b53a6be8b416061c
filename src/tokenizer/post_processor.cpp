#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "tokenizer/json_config.h"
#include "util/error.h"

namespace dspark {

namespace {

// A single-sequence template: a list of pieces, each either "the sequence" or fixed token ids.
class TemplateProcessor : public PostProcessor {
 public:
  struct Piece {
    bool sequence;
    std::vector<TokenId> ids;
  };
  explicit TemplateProcessor(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}

  std::vector<TokenId> process(std::vector<TokenId> ids) const override {
    std::vector<TokenId> out;
    out.reserve(ids.size() + 4);
    for (const Piece& piece : pieces_) {
      if (piece.sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), piece.ids.begin(), piece.ids.end());
      }
    }
    return out;
  }
  std::optional<TokenId> leading_special() const override {
    if (!pieces_.empty() && !pieces_.front().sequence && !pieces_.front().ids.empty())
      return pieces_.front().ids.front();
    return std::nullopt;
  }

 private:
  std::vector<Piece> pieces_;
};

class IdentityProcessor : public PostProcessor {
 public:
  std::vector<TokenId> process(std::vector<TokenId> ids) const override { return ids; }
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  std::vector<TokenId> process(std::vector<TokenId> ids) const override {
    for (const auto& step : steps_) ids = step->process(std::move(ids));
    return ids;
  }
  std::optional<TokenId> leading_special() const override {
    for (const auto& step : steps_)
      if (auto id = step->leading_special()) return id;
    return std::nullopt;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::unique_ptr<PostProcessor> make_template(const nlohmann::json& config) {
  const auto& single = json_field(config, "single", "post_processor TemplateProcessing");
  const auto& specials =
      config.contains("special_tokens") ? config["special_tokens"] : nlohmann::json::object();
  std::vector<TemplateProcessor::Piece> pieces;
  auto special_ids = [&](const std::string& name) {
    if (!specials.contains(name))
      fail("post_processor TemplateProcessing: unknown special token '{}'", name);
    std::vector<TokenId> ids;
    for (const auto& id : json_array(specials[name], "ids", "post_processor special token"))
      ids.push_back(id.get<TokenId>());
    return ids;
  };
  if (single.is_string()) {
    // The short form: "<bos> $A" or "$A:0 </s>:0".
    std::string text = single.get<std::string>();
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find(' ', pos);
      if (end == std::string::npos) end = text.size();
      std::string word = text.substr(pos, end - pos);
      if (const size_t colon = word.rfind(':'); colon != std::string::npos) word.resize(colon);
      if (!word.empty()) {
        if (word[0] == '$') {
          pieces.push_back({true, {}});
        } else {
          pieces.push_back({false, special_ids(word)});
        }
      }
      pos = end + 1;
    }
  } else {
    if (!single.is_array()) fail("post_processor TemplateProcessing: 'single' is not an array");
    for (const auto& piece : single) {
      if (piece.contains("Sequence")) {
        pieces.push_back({true, {}});
      } else if (piece.contains("SpecialToken")) {
        pieces.push_back({false, special_ids(json_string(piece["SpecialToken"], "id",
                                                         "post_processor SpecialToken"))});
      } else {
        fail("post_processor TemplateProcessing: unknown template piece");
      }
    }
  }
  return std::make_unique<TemplateProcessor>(std::move(pieces));
}

// RobertaProcessing / BertProcessing: {"cls": ["<s>", 0], "sep": ["</s>", 2]} -> cls $A sep.
std::unique_ptr<PostProcessor> make_cls_sep(const nlohmann::json& config) {
  auto id_of = [&](const char* key) {
    const auto& pair = json_array(config, key, "post_processor");
    if (pair.size() != 2 || !pair[1].is_number_integer()) fail("post_processor: bad '{}'", key);
    return pair[1].get<TokenId>();
  };
  std::vector<TemplateProcessor::Piece> pieces{
      {false, {id_of("cls")}}, {true, {}}, {false, {id_of("sep")}}};
  return std::make_unique<TemplateProcessor>(std::move(pieces));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& config) {
  if (config.is_null()) return nullptr;
  const std::string type = json_string(config, "type", "post_processor");
  if (type == "TemplateProcessing") return make_template(config);
  if (type == "ByteLevel") return std::make_unique<IdentityProcessor>();
  if (type == "RobertaProcessing" || type == "BertProcessing") return make_cls_sep(config);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const auto& step : json_array(config, "processors", "post_processor Sequence")) {
      if (auto p = make_post_processor(step)) steps.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  fail("unsupported post_processor type '{}'", type);
}

}  // namespace dspark
