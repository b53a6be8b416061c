// Atomic writes: write to a temp file in the destination directory, fsync, rename over the target.
// A reader sees either the old file or the new one, never a half-written one.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace dspark::io {

// Calls `write(fd)` on a temp file next to `path`, then renames it to `path`. The temp file is
// removed if `write` throws.
void write_file_atomic(const std::string& path, const std::function<void(int fd)>& write);
void write_text_atomic(const std::string& path, std::string_view text);

// Writes all `size` bytes to `fd` (retrying short writes and EINTR); throws dspark::Error
// "cannot write PATH: reason". `path` only names the file in the message.
void write_all(int fd, const void* data, size_t size, const std::string& path);

// Reads a whole file; throws dspark::Error "cannot read PATH: reason".
std::string read_text_file(const std::string& path);

}  // namespace dspark::io
