#include "tokenizer/sentencepiece_tokenizer.h"

#include "tokenizer/sentencepiece_library.h"

#include "util/error.h"

namespace dspark {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // "▁"

}  // namespace

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_file(const std::string& path) {
  auto sp = SentencePieceModel::load(path);
  if (sp->GetPieceSize() <= 0) fail("tokenizer: SentencePiece model '{}' has no pieces", path);
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(sp)));
}

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<SentencePieceModel> sp)
    : sp_(std::move(sp)) {
  std::vector<AddedToken> specials;
  const int n = sp_->GetPieceSize();
  for (int id = 0; id < n; ++id) {
    if (sp_->IsControl(id) || sp_->IsUnknown(id)) {
      AddedToken token;
      token.content = sp_->IdToPiece(id);
      token.id = id;
      token.special = true;
      specials.push_back(std::move(token));
    }
  }
  specials_ = TokenMatcher(specials);

  // The model proto's normalizer flags would tell whether decoding drops the leading "▁", but
  // reading them needs protobuf headers; asking the library to decode one such piece is simpler.
  for (int id = 0; id < n; ++id) {
    const std::string& piece = sp_->IdToPiece(id);
    if (sp_->IsControl(id) || sp_->IsUnknown(id) || sp_->IsByte(id) || sp_->IsUnused(id)) continue;
    if (piece.size() > kSpaceSymbol.size() && piece.starts_with(kSpaceSymbol)) {
      strip_leading_space_ = !sp_->DecodeIds({id}).starts_with(' ');
      break;
    }
  }
  if (const int unk = sp_->unk_id(); unk >= 0) unk_surface_ = sp_->DecodeIds({unk});
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<TokenId> SentencePieceTokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<TokenId> ids;
  if (add_special && add_bos_ && bos_id()) ids.push_back(*bos_id());
  std::vector<int> piece_ids;
  for (const auto& segment : specials_.split(text)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    const std::string_view part = text.substr(segment.begin, segment.end - segment.begin);
    piece_ids = sp_->Encode(part);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  if (add_special && add_eos_ && !eos_ids().empty()) ids.push_back(eos_ids().front());
  return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  std::string text;
  // SentencePiece drops the "▁" of the first piece only while its own output is still empty;
  // rendered control pieces do not count, as the library never renders them.
  bool at_start = true;
  const int n = sp_->GetPieceSize();
  for (TokenId id : ids) {
    if (id < 0 || id >= n) continue;
    if (sp_->IsControl(id)) {
      if (!skip_special) text += sp_->IdToPiece(id);
      continue;
    }
    if (sp_->IsUnknown(id)) {
      if (!skip_special) {
        text += unk_surface_;
        at_start = at_start && unk_surface_.empty();
      }
      continue;
    }
    const std::string& piece = sp_->IdToPiece(id);
    if (sp_->IsByte(id)) {  // "<0xXX>"
      text += static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16));
      at_start = false;
      continue;
    }
    std::string_view rest = piece;
    if (at_start && strip_leading_space_ && rest.starts_with(kSpaceSymbol))
      rest.remove_prefix(kSpaceSymbol.size());
    for (size_t pos = 0; pos < rest.size();) {
      if (rest.substr(pos).starts_with(kSpaceSymbol)) {
        text += ' ';
        pos += kSpaceSymbol.size();
      } else {
        text += rest[pos++];
      }
    }
    at_start = at_start && rest.empty();
  }
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::optional<TokenId> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  const int id = sp_->PieceToId({token.data(), token.size()});
  // PieceToId answers <unk>'s id for any unknown piece.
  if (id < 0 || sp_->IdToPiece(id) != token) return std::nullopt;
  return id;
}

std::string SentencePieceTokenizer::id_to_token(TokenId id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) return {};
  return sp_->IdToPiece(id);
}

bool SentencePieceTokenizer::is_special(TokenId id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) return false;
  return sp_->IsControl(id) || sp_->IsUnknown(id);
}

std::optional<TokenId> SentencePieceTokenizer::model_bos() const {
  const int id = sp_->bos_id();
  return id >= 0 ? std::optional<TokenId>(id) : std::nullopt;
}

std::optional<TokenId> SentencePieceTokenizer::model_eos() const {
  const int id = sp_->eos_id();
  return id >= 0 ? std::optional<TokenId>(id) : std::nullopt;
}

}  // namespace dspark
