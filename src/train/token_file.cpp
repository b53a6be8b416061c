#include "train/token_file.h"

#include <cstring>

#include "io/atomic_file.h"
#include "io/mapped_file.h"
#include "util/error.h"

namespace dspark {
namespace {
constexpr char kMagic[8] = {'D', 'S', 'P', 'K', 'T', 'O', 'K', '\0'};
constexpr size_t kHeaderBytes = 64;

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
template <typename T>
T get(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}
}  // namespace

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, uint64_t vocab_size,
                      uint64_t tokenizer_fingerprint) {
  const uint32_t width = vocab_size <= 65536 ? 2 : 4;
  std::string header(kMagic, sizeof(kMagic));
  put<uint32_t>(header, 1);
  put<uint32_t>(header, width);
  put<uint64_t>(header, tokens.size());
  put<uint64_t>(header, vocab_size);
  put<uint64_t>(header, tokenizer_fingerprint);
  header.resize(kHeaderBytes, '\0');
  std::string body(tokens.size() * width, '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || uint64_t(tokens[i]) >= vocab_size)
      fail("token id {} at {} is outside the vocabulary of {} (writing {})", tokens[i], i, vocab_size, path);
    if (width == 2) {
      const uint16_t v = uint16_t(tokens[i]);
      std::memcpy(&body[i * 2], &v, 2);
    } else {
      const uint32_t v = uint32_t(tokens[i]);
      std::memcpy(&body[i * 4], &v, 4);
    }
  }
  io::write_file_atomic(path, [&](int fd) {
    io::write_all(fd, header.data(), header.size(), path);
    io::write_all(fd, body.data(), body.size(), path);
  });
}

TokenFile TokenFile::open(const std::string& path) {
  TokenFile f;
  f.file_ = io::MappedFile::open(path);
  const uint8_t* p = f.file_->data();
  const size_t size = f.file_->size();
  if (size < kHeaderBytes || std::memcmp(p, kMagic, sizeof(kMagic)) != 0)
    fail("{} is not a dspark token file (bad header)", path);
  const uint32_t version = get<uint32_t>(p + 8);
  if (version != 1) fail("{}: unsupported token file version {}", path, version);
  f.width_ = get<uint32_t>(p + 12);
  if (f.width_ != 2 && f.width_ != 4) fail("{}: bad token width {}", path, f.width_);
  f.info_.n_tokens = get<uint64_t>(p + 16);
  f.info_.vocab_size = get<uint64_t>(p + 24);
  f.info_.tokenizer_fingerprint = get<uint64_t>(p + 32);
  if (f.info_.n_tokens > (size - kHeaderBytes) / f.width_ || kHeaderBytes + f.info_.n_tokens * f.width_ != size)
    fail("{}: size {} does not match {} tokens of {} bytes (truncated?)", path, size, f.info_.n_tokens, f.width_);
  f.data_ = p + kHeaderBytes;
  for (uint64_t i = 0; i < f.info_.n_tokens; ++i)
    if (uint64_t(f.at(int64_t(i))) >= f.info_.vocab_size)
      fail("{}: token {} at {} is outside the vocabulary of {}", path, f.at(int64_t(i)), i, f.info_.vocab_size);
  return f;
}

int64_t TokenFile::at(int64_t i) const {
  return width_ == 2 ? get<uint16_t>(data_ + i * 2) : get<uint32_t>(data_ + i * 4);
}

void TokenFile::read(int64_t begin, int64_t n, int64_t* out) const {
  if (begin < 0 || n < 0 || begin + n > size()) fail("token file read [{}, {}) out of range {}", begin, begin + n, size());
  for (int64_t i = 0; i < n; ++i) out[i] = at(begin + i);
}

}  // namespace dspark
