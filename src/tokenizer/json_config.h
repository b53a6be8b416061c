// Small checked accessors for tokenizer.json objects: a wrong or missing field becomes a one-line
// dspark::Error saying which field of which component, instead of a nlohmann type_error.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/regex.h"
#include "util/error.h"

namespace dspark {

inline const nlohmann::json& json_field(const nlohmann::json& object, const char* key,
                                        std::string_view where) {
  if (!object.is_object()) fail("{} is not a JSON object", where);
  const auto it = object.find(key);
  if (it == object.end()) fail("{} has no '{}'", where, key);
  return *it;
}

inline std::string json_string(const nlohmann::json& object, const char* key,
                               std::string_view where) {
  const auto& value = json_field(object, key, where);
  if (!value.is_string()) fail("{}: '{}' is not a string", where, key);
  return value.get<std::string>();
}

inline const nlohmann::json& json_array(const nlohmann::json& object, const char* key,
                                        std::string_view where) {
  const auto& value = json_field(object, key, where);
  if (!value.is_array()) fail("{}: '{}' is not an array", where, key);
  return value;
}

// Optional string field: `fallback` when absent or null.
inline std::string json_string_or(const nlohmann::json& object, const char* key,
                                  std::string fallback) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_string()) fail("'{}' is not a string", key);
  return it->get<std::string>();
}

// {"pattern": {"String": "..."}} or {"pattern": {"Regex": "..."}}.
inline Pattern json_pattern(const nlohmann::json& object, std::string_view where) {
  const auto& pattern = json_field(object, "pattern", where);
  if (pattern.is_object()) {
    if (const auto it = pattern.find("String"); it != pattern.end() && it->is_string())
      return Pattern::literal(it->get<std::string>());
    if (const auto it = pattern.find("Regex"); it != pattern.end() && it->is_string())
      return Pattern::regex(it->get<std::string>());
  }
  fail("{}: 'pattern' must be {{\"String\": ...}} or {{\"Regex\": ...}}", where);
}

}  // namespace dspark
