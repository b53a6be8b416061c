// A tokenized corpus on disk: a 64-byte header and the token ids back to back (uint16 when the
// vocabulary fits, else uint32). Training maps it and reads windows straight from the mapping, so
// the corpus is tokenized once and never held in memory as tensors.
//
// Header (little endian): "DSPKTOK\0" | u32 version = 1 | u32 bytes per token (2 or 4)
//                         | u64 token count | u64 vocabulary size | u64 tokenizer fingerprint | 24 zero bytes
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dspark {
namespace io { class MappedFile; }

struct TokenFileInfo {
  uint64_t n_tokens = 0;
  uint64_t vocab_size = 0;
  uint64_t tokenizer_fingerprint = 0;  // FNV-1a of tokenizer.json: a stale file is detected
};

// Writes `tokens` atomically. Throws when an id is outside [0, vocab_size).
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, uint64_t vocab_size,
                      uint64_t tokenizer_fingerprint);

class TokenFile {
 public:
  // Maps and validates the file; throws dspark::Error naming the file for any malformed header,
  // a size that does not match the count, or an id outside the vocabulary.
  static TokenFile open(const std::string& path);
  const TokenFileInfo& info() const { return info_; }
  int64_t size() const { return int64_t(info_.n_tokens); }
  int64_t at(int64_t i) const;
  // Copies tokens [begin, begin + n) into `out` as int64 (what LibTorch embeds).
  void read(int64_t begin, int64_t n, int64_t* out) const;

 private:
  std::shared_ptr<const io::MappedFile> file_;
  TokenFileInfo info_;
  uint32_t width_ = 2;
  const uint8_t* data_ = nullptr;
};

// FNV-1a 64 of a byte string (fingerprints of tokenizers and data).
uint64_t fnv1a64(const std::string& bytes);

}  // namespace dspark
