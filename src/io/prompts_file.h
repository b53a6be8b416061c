// Prompt sets: JSON lines, one object per line with a "prompt" string (other fields are ignored;
// blank lines are skipped). A malformed line is a one-line error naming the file and line.
#pragma once
#include <string>
#include <vector>

namespace dspark::io {

std::vector<std::string> read_prompts_jsonl(const std::string& path);

}  // namespace dspark::io
