// Streaming decode without re-decoding the whole sequence on every token.
//
// Decoders are not token-by-token: a leading space is stripped only at the start of the text,
// byte-fallback tokens combine into one character, etc. So each push decodes a short window of
// recent ids and emits what the window's text gained. The window keeps some already-emitted
// tokens as context in front of the new ones; decode(context + new) then equals decode(context)
// followed by the new text, provided the context decodes to something non-empty (the start-of-
// text rules have then been used up inside it). The window is trimmed whenever everything in it
// has been emitted, so each push costs O(window), not O(sequence).
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dspark {

namespace {

constexpr size_t kContextTokens = 4;   // tokens kept in front after trimming
constexpr size_t kTrimThreshold = 16;  // window size that triggers a trim

}  // namespace

std::string StreamingDecoder::push(TokenId id) {
  ids_.push_back(id);
  const std::string text = tokenizer_.decode(ids_, skip_special_);
  const size_t complete = utf8::complete_prefix_length(text);
  std::string out;
  if (complete > emitted_bytes_) {
    out = utf8::sanitize(std::string_view(text).substr(emitted_bytes_, complete - emitted_bytes_));
    emitted_bytes_ = complete;
  }
  if (complete == text.size() && ids_.size() >= kTrimThreshold) {
    // Keep the shortest suffix of at least kContextTokens tokens whose text is non-empty. When
    // the window was the true start of the sequence, keeping all of it is always exact too.
    for (size_t keep = kContextTokens; keep < ids_.size(); ++keep) {
      std::vector<TokenId> context(ids_.end() - keep, ids_.end());
      std::string context_text = tokenizer_.decode(context, skip_special_);
      // The context must end exactly where `text` ends, or it is not a clean cut.
      if (!context_text.empty() && text.ends_with(context_text)) {
        ids_ = std::move(context);
        emitted_bytes_ = context_text.size();
        break;
      }
    }
  }
  return out;
}

std::string StreamingDecoder::flush() {
  if (ids_.empty()) return {};
  const std::string text = tokenizer_.decode(ids_, skip_special_);
  std::string out;
  if (text.size() > emitted_bytes_)
    out = utf8::sanitize(std::string_view(text).substr(emitted_bytes_));
  ids_.clear();
  emitted_bytes_ = 0;
  return out;
}

}  // namespace dspark
