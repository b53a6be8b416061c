#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace dspark::io {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  return std::make_shared<const MappedFile>(path);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("cannot stat {}: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("cannot open {}: not a regular file", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    // MAP_PRIVATE + PROT_READ: pages come from the page cache and are shared with other readers;
    // nothing we do can write back to the checkpoint.
    void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail("cannot map {}: {}", path, std::strerror(err));
    }
    data_ = addr;
  }
  // The mapping keeps the file alive on its own; the descriptor is no longer needed.
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace dspark::io
