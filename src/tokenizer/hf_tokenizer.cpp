// Encoding follows HF tokenizers' order of work: added tokens are cut out of the raw text first,
// each remaining stretch is normalized on its own (so Llama-2's Prepend("▁") applies after every
// special token, as HF does), then split into words, then each word goes through BPE.
#include "tokenizer/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include "tokenizer/json_config.h"
#include "tokenizer/tokenizer_json_reader.h"
#include "util/error.h"

namespace dspark {

namespace {

std::unique_ptr<BpeModel> make_model(TokenizerJson& data) {
  const auto& model = json_field(data.doc, "model", "tokenizer.json");
  const std::string type = json_string_or(model, "type", "BPE");
  if (type != "BPE") fail("unsupported model type '{}' (only BPE)", type);
  if (data.vocab.empty()) fail("model: no 'vocab'");

  BpeOptions options;
  if (const auto it = model.find("unk_token"); it != model.end() && it->is_string())
    options.unk_token = it->get<std::string>();
  auto flag = [&](const char* key) {
    const auto it = model.find(key);
    return it != model.end() && it->is_boolean() && it->get<bool>();
  };
  options.fuse_unk = flag("fuse_unk");
  options.byte_fallback = flag("byte_fallback");
  options.ignore_merges = flag("ignore_merges");
  options.continuing_subword_prefix = json_string_or(model, "continuing_subword_prefix", "");
  options.end_of_word_suffix = json_string_or(model, "end_of_word_suffix", "");
  // "dropout" only matters for training-time regularization; inference ignores it.
  return std::make_unique<BpeModel>(std::move(data.vocab), data.merges, std::move(options));
}

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& doc) {
  std::vector<AddedToken> tokens;
  const auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return tokens;
  if (!it->is_array()) fail("'added_tokens' is not an array");
  for (const auto& entry : *it) {
    AddedToken token;
    token.content = json_string(entry, "content", "added token");
    const auto& id = json_field(entry, "id", "added token");
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      fail("added token '{}' has a bad id", token.content);
    token.id = id.get<TokenId>();
    token.special = entry.value("special", false);
    token.lstrip = entry.value("lstrip", false);
    token.rstrip = entry.value("rstrip", false);
    token.single_word = entry.value("single_word", false);
    token.normalized = entry.value("normalized", !token.special);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

}  // namespace

std::unique_ptr<HfTokenizer> HfTokenizer::from_file(const std::string& path) {
  TokenizerJson data = read_tokenizer_json(path);  // its errors name the file already
  try {
    return std::make_unique<HfTokenizer>(std::move(data));
  } catch (const Error& e) {
    fail("tokenizer: '{}': {}", path, e.what());
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer: '{}': unexpected JSON content: {}", path, e.what());
  }
}

HfTokenizer::HfTokenizer(const nlohmann::json& doc) : HfTokenizer(split_tokenizer_json(doc)) {}

HfTokenizer::HfTokenizer(TokenizerJson data) {
  const nlohmann::json& doc = data.doc;
  if (!doc.is_object()) fail("not a tokenizer.json object");
  model_ = make_model(data);
  normalizer_ = make_normalizer(doc.value("normalizer", nlohmann::json()));
  pre_tokenizer_ = make_pre_tokenizer(doc.value("pre_tokenizer", nlohmann::json()));
  post_processor_ = make_post_processor(doc.value("post_processor", nlohmann::json()));
  decoder_ = make_decoder(doc.value("decoder", nlohmann::json()));

  added_ = parse_added_tokens(doc);
  std::vector<AddedToken> raw, normalized;
  for (size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& token = added_[i];
    added_by_content_.emplace(token.content, token.id);
    added_by_id_[token.id] = i;
    if (token.normalized && normalizer_) {
      AddedToken copy = token;
      copy.content = normalizer_->normalize(token.content);
      normalized.push_back(std::move(copy));
    } else {
      raw.push_back(token);
    }
  }
  raw_matcher_ = TokenMatcher(raw);
  normalized_matcher_ = TokenMatcher(normalized);

  // One past the largest id: the size an embedding table needs.
  vocab_size_ = model_->id_limit();
  for (const AddedToken& token : added_)
    vocab_size_ = std::max<int64_t>(vocab_size_, int64_t(token.id) + 1);
}

void HfTokenizer::encode_text(std::string_view text, bool at_start,
                              std::vector<TokenId>& out) const {
  const std::string normalized = normalizer_ ? normalizer_->normalize(text) : std::string(text);
  for (const auto& segment : normalized_matcher_.split(normalized)) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
      continue;
    }
    std::vector<PreToken> pieces{{normalized.substr(segment.begin, segment.end - segment.begin),
                                  at_start && segment.begin == 0}};
    if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
    for (const PreToken& piece : pieces) model_->encode_word(piece.text, out);
  }
}

std::vector<TokenId> HfTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const auto& segment : raw_matcher_.split(text)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      encode_text(text.substr(segment.begin, segment.end - segment.begin), segment.begin == 0, ids);
    }
  }
  if (add_special && post_processor_) ids = post_processor_->process(std::move(ids));
  return ids;
}

const std::string* HfTokenizer::token_string(TokenId id) const {
  if (const auto it = added_by_id_.find(id); it != added_by_id_.end())
    return &added_[it->second].content;
  if (model_->contains(id)) return &model_->id_to_token(id);
  return nullptr;
}

std::string HfTokenizer::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (skip_special && is_special(id)) continue;
    // Ids with no token (e.g. padding rows of an embedding table) are skipped, as HF does.
    if (const std::string* token = token_string(id)) tokens.push_back(*token);
  }
  std::string text;
  if (decoder_) {
    decoder_->decode_chain(tokens);
    for (const std::string& t : tokens) text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) text += ' ';
      text += tokens[i];
    }
  }
  return text;
}

int64_t HfTokenizer::vocab_size() const { return vocab_size_; }

std::optional<TokenId> HfTokenizer::token_to_id(std::string_view token) const {
  if (const auto it = added_by_content_.find(token); it != added_by_content_.end())
    return it->second;
  return model_->token_to_id(token);
}

std::string HfTokenizer::id_to_token(TokenId id) const {
  const std::string* token = token_string(id);
  return token ? *token : std::string();
}

bool HfTokenizer::is_special(TokenId id) const {
  const auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && added_[it->second].special;
}

std::optional<TokenId> HfTokenizer::template_bos() const {
  return post_processor_ ? post_processor_->leading_special() : std::nullopt;
}

}  // namespace dspark
