#include "io/prompts_file.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "io/atomic_file.h"
#include "util/error.h"

namespace dspark::io {

std::vector<std::string> read_prompts_jsonl(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::vector<std::string> prompts;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail("{}:{}: not a JSON object", path, number);
    auto it = j.find("prompt");
    if (it == j.end() || !it->is_string()) fail("{}:{}: no \"prompt\" string", path, number);
    prompts.push_back(it->get<std::string>());
  }
  if (prompts.empty()) fail("{}: no prompts", path);
  return prompts;
}

}  // namespace dspark::io
