// A string-keyed hash map that can be searched with a string_view without building a temporary
// std::string (the BPE inner loop looks up every character and every candidate token).
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace dspark {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

}  // namespace dspark
