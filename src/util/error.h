// The one error type of the engine. Every failure a user can cause (bad files, bad arguments,
// bad requests) throws dspark::Error with a one-line message; the CLI prints it and exits 1.
#pragma once
#include <stdexcept>
#include <string>
#include <fmt/format.h>

namespace dspark {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// fail("bad {} in {}", a, b): throws dspark::Error with a formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace dspark
