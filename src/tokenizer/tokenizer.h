// Tokenizer interface: text <-> token ids. Implementations: HF tokenizer.json (byte-level BPE as
// GPT-2 / Qwen / Llama-3 write it, and byte-fallback + metaspace BPE as Gemma / Llama-2 write it)
// and SentencePiece tokenizer.model.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dspark {

using TokenId = int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes text. Added/special tokens written literally in the text (e.g. "<|endoftext|>") are
  // matched as single tokens. `add_special` prepends BOS (and whatever the tokenizer's
  // post-processor adds) when the tokenizer is configured to.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special = false) const = 0;
  // Decodes ids to UTF-8 bytes (may end in a partial UTF-8 sequence; see StreamingDecoder).
  virtual std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const = 0;

  virtual int64_t vocab_size() const = 0;
  virtual std::optional<TokenId> token_to_id(std::string_view token) const = 0;
  virtual std::string id_to_token(TokenId id) const = 0;  // raw vocab string
  virtual bool is_special(TokenId id) const = 0;
  virtual std::optional<TokenId> bos_id() const = 0;
  virtual std::vector<TokenId> eos_ids() const = 0;  // may be empty

  // Loads `dir/tokenizer.json` if present, else `dir/tokenizer.model` (SentencePiece); `path` may
  // also name either file directly. EOS/BOS come from the tokenizer and, when present, from
  // `dir/config.json` / `dir/generation_config.json` / `dir/tokenizer_config.json`.
  static std::unique_ptr<Tokenizer> load(const std::string& path);
};

// Turns a stream of token ids into text that never splits a UTF-8 character: push() returns the
// bytes that became complete, holding back an incomplete trailing sequence until the next token.
// Each push decodes only a short window of recent ids (see streaming_decoder.cpp), so a long
// generation costs O(tokens), not O(tokens^2). Concatenating every push() and the final flush()
// gives tokenizer.decode(all ids) with ill-formed bytes replaced by U+FFFD.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  std::string push(TokenId id);
  // Whatever is held back (invalid bytes come out as U+FFFD); the decoder then starts afresh.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<TokenId> ids_;  // window: already-emitted context, then not-yet-complete tokens
  size_t emitted_bytes_ = 0;  // bytes of tokenizer_.decode(ids_) already returned
};

}  // namespace dspark
