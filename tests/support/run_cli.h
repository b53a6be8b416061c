// Runs the dspark command (DSPARK_CLI, else the build directory's) the way a user would.
#pragma once
#include <string>

namespace dspark::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `arguments` go through the shell; `environment` ("NAME=VALUE ...") is put in front.
RunResult run_cli(const std::string& arguments, const std::string& environment = "");

// Failed with exactly one line on stderr, starting "error: ".
bool is_one_line_error(const RunResult& r);

}  // namespace dspark::testing
