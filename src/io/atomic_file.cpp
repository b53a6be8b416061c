#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "util/error.h"

namespace dspark::io {

namespace fs = std::filesystem;

namespace {

// Makes the rename itself durable: without syncing the directory, a crash can lose the new
// directory entry even though the file's data was synced.
void sync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems refuse to open directories
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write {}: {}", path, std::strerror(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void write_file_atomic(const std::string& path, const std::function<void(int fd)>& write) {
  fs::path target(path);
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  // The temp file lives in the destination directory so rename() stays on one filesystem (and is
  // therefore atomic). The leading dot keeps it out of globs such as "*.safetensors".
  std::string templ = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) fail("cannot create a temp file for {}: {}", path, std::strerror(errno));
  std::string temp(name.data());

  try {
    // mkstemp creates the file 0600; give it the mode a plain create would, or keep the mode of
    // the file being replaced.
    struct stat st {};
    mode_t mode = ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644;
    ::fchmod(fd, mode);
    write(fd);
    if (::fsync(fd) != 0) fail("cannot sync {}: {}", path, std::strerror(errno));
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) fail("cannot write {}: {}", path, std::strerror(errno));
    if (::rename(temp.c_str(), path.c_str()) != 0)
      fail("cannot rename {} to {}: {}", temp, path, std::strerror(errno));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  sync_directory(dir);
}

void write_text_atomic(const std::string& path, std::string_view text) {
  write_file_atomic(path, [&](int fd) { write_all(fd, text.data(), text.size(), path); });
}

std::string read_text_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot read {}: {}", path, std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      fail("cannot read {}: {}", path, std::strerror(err));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace dspark::io
