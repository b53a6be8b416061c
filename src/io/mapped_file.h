// Read-only memory map of a whole file. Tensors point straight into the mapping (zero-copy), so
// the mapping is shared (std::shared_ptr) and stays alive as long as any tensor view uses it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dspark::io {

class MappedFile {
 public:
  // Maps `path`; throws dspark::Error "cannot open PATH: reason" (or map / not a regular file).
  static std::shared_ptr<const MappedFile> open(const std::string& path);

  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // nullptr for an empty file: mmap cannot map zero bytes, and there is nothing to read anyway.
  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dspark::io
