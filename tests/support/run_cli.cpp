#include "support/run_cli.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "support/tiny_models.h"

namespace dspark::testing {

RunResult run_cli(const std::string& arguments, const std::string& environment) {
  const char* cli = std::getenv("DSPARK_CLI");
  const std::string binary = cli ? cli : std::string(DSPARK_BINARY_DIR) + "/dspark";
  const std::string err_file = temp_dir("cli-err") + "/stderr";
  const std::string command =
      (environment.empty() ? "" : "env " + environment + " ") + binary + " " + arguments + " 2>" + err_file;
  RunResult result;
  FILE* pipe = popen(command.c_str(), "r");
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_file);
  result.err.assign(std::istreambuf_iterator<char>(err), {});
  return result;
}

bool is_one_line_error(const RunResult& r) {
  return r.exit_code != 0 && r.err.rfind("error: ", 0) == 0 && r.err.find('\n') == r.err.size() - 1;
}

}  // namespace dspark::testing
