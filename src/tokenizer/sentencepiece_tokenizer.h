// A SentencePiece tokenizer.model behind the Tokenizer interface. Encoding is the library's own;
// decoding is done here from the pieces (same rules as the library) so that byte pieces come out
// as raw bytes and a StreamingDecoder can hold back a split character.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/tokenizer_base.h"

#include "tokenizer/sentencepiece_library.h"

namespace dspark {

class SentencePieceTokenizer : public TokenizerBase {
 public:
  static std::unique_ptr<SentencePieceTokenizer> from_file(const std::string& path);
  ~SentencePieceTokenizer() override;

  std::vector<TokenId> encode(std::string_view text, bool add_special = false) const override;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const override;
  int64_t vocab_size() const override;
  std::optional<TokenId> token_to_id(std::string_view token) const override;
  std::string id_to_token(TokenId id) const override;
  bool is_special(TokenId id) const override;  // control pieces (<s>, </s>) and <unk>

  // What encode(add_special = true) adds; BOS by default, as Llama-style models expect.
  void set_add_bos(bool add) { add_bos_ = add; }
  void set_add_eos(bool add) { add_eos_ = add; }
  // The model's own <s> / </s>, if it defines them.
  std::optional<TokenId> model_bos() const;
  std::optional<TokenId> model_eos() const;

 private:
  explicit SentencePieceTokenizer(std::unique_ptr<SentencePieceModel> sp);

  std::unique_ptr<SentencePieceModel> sp_;
  TokenMatcher specials_;            // control pieces written literally in the text
  bool strip_leading_space_ = true;  // decode drops the dummy-prefix space at the start
  std::string unk_surface_;          // what <unk> decodes to (" ⁇ " by default)
  bool add_bos_ = true;
  bool add_eos_ = false;
};

}  // namespace dspark
