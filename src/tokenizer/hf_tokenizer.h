// A tokenizer described by a Hugging Face tokenizer.json: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor and decoder, each built from its JSON object.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_base.h"
#include "tokenizer/tokenizer_json_reader.h"

namespace dspark {

class HfTokenizer : public TokenizerBase {
 public:
  // Reads and parses `path`; every error names the file.
  static std::unique_ptr<HfTokenizer> from_file(const std::string& path);
  // Builds from a parsed document (a trainer can hand over what it would write to disk).
  explicit HfTokenizer(const nlohmann::json& doc);
  explicit HfTokenizer(TokenizerJson data);

  std::vector<TokenId> encode(std::string_view text, bool add_special = false) const override;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const override;
  int64_t vocab_size() const override;
  std::optional<TokenId> token_to_id(std::string_view token) const override;
  std::string id_to_token(TokenId id) const override;
  bool is_special(TokenId id) const override;

  // The token the post-processor puts first (Gemma's <bos>), if it adds one.
  std::optional<TokenId> template_bos() const;

 private:
  const std::string* token_string(TokenId id) const;  // added tokens first, then the model
  void encode_text(std::string_view text, bool at_start, std::vector<TokenId>& out) const;

  std::unique_ptr<BpeModel> model_;
  std::vector<AddedToken> added_;
  StringMap<TokenId> added_by_content_;
  std::unordered_map<TokenId, size_t> added_by_id_;  // -> index in added_
  TokenMatcher raw_matcher_;                         // added tokens matched before normalization
  TokenMatcher normalized_matcher_;  // added tokens with normalized = true, matched after it
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  int64_t vocab_size_ = 0;
};

}  // namespace dspark
