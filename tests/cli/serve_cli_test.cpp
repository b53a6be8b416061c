// `dspark serve` as a process: it prints where it listens, answers, and on SIGTERM finishes the
// request in flight and exits 0; bad setups are one-line errors.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fcntl.h>
#include <regex>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace dspark {
namespace {

std::string cli_binary() {
  const char* cli = std::getenv("DSPARK_CLI");
  return cli ? cli : std::string(DSPARK_BINARY_DIR) + "/dspark";
}

// A child `dspark serve ...` whose stderr we read.
struct ServeProcess {
  explicit ServeProcess(const std::vector<std::string>& args) {
    int pipe_fds[2];
    EXPECT_EQ(pipe(pipe_fds), 0);
    pid = fork();
    if (pid == 0) {
      dup2(pipe_fds[1], STDERR_FILENO);
      close(pipe_fds[0]);
      std::vector<std::string> all = {cli_binary(), "serve"};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(pipe_fds[1]);
    err_fd = pipe_fds[0];
  }
  ~ServeProcess() {
    if (pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    close(err_fd);
  }
  // Reads stderr until `pattern` matches (or EOF / timeout); returns the first capture group.
  std::string wait_for(const std::string& pattern, int seconds = 60) {
    const std::regex re(pattern);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    char buffer[512];
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      if (std::regex_search(err, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
      fd_set set;
      FD_ZERO(&set);
      FD_SET(err_fd, &set);
      timeval tv{0, 100000};
      if (select(err_fd + 1, &set, nullptr, nullptr, &tv) > 0) {
        const ssize_t n = read(err_fd, buffer, sizeof(buffer));
        if (n <= 0) break;
        err.append(buffer, size_t(n));
      }
    }
    return {};
  }
  int wait_exit(int seconds = 60) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  pid_t pid = -1;
  int err_fd = -1;
  std::string err;
};

const std::string kModel = std::string(DSPARK_SOURCE_DIR) + "/models/default-small";

TEST(ServeCli, AnswersAndStopsCleanlyOnSigterm) {
  ServeProcess server({"-m", kModel, "--draft", "ngram", "--port", "0", "-t", "1"});
  const std::string port = server.wait_for("listening on http://127\\.0\\.0\\.1:(\\d+)");
  ASSERT_FALSE(port.empty()) << server.err;
  httplib::Client client("127.0.0.1", std::stoi(port));
  client.set_read_timeout(60, 0);
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  // A request in flight when SIGTERM arrives still completes.
  std::thread in_flight([&] {
    httplib::Client c("127.0.0.1", std::stoi(port));
    c.set_read_timeout(60, 0);
    auto res = c.Post("/v1/completions", R"({"prompt": "def main():\n", "max_tokens": 200, "temperature": 0})",
                      "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    auto body = nlohmann::json::parse(res->body);
    EXPECT_GT(body["usage"]["completion_tokens"].get<int>(), 0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(server.pid, SIGTERM);
  in_flight.join();
  EXPECT_EQ(server.wait_exit(), 0) << server.err;
  EXPECT_FALSE(server.wait_for("stopping.*\n.*stopped", 5).empty()) << server.err;
}

TEST(ServeCli, BadSetupsAreOneLineErrors) {
  {
    ServeProcess server({"-m", "/nonexistent/model", "--port", "0"});
    EXPECT_EQ(server.wait_exit(), 1);
    server.wait_for("error: .*\n");
    EXPECT_NE(server.err.find("error: model directory"), std::string::npos) << server.err;
  }
  {
    ServeProcess server({"-m", kModel, "--draft", "bogus", "--port", "0"});
    EXPECT_EQ(server.wait_exit(), 1);
    server.wait_for("error: .*\n");
    EXPECT_NE(server.err.find("unknown --draft"), std::string::npos) << server.err;
  }
  {
    ServeProcess server({"-m", kModel, "--parallel", "0", "--port", "0"});
    EXPECT_EQ(server.wait_exit(), 1);
    server.wait_for("error: .*\n");
    EXPECT_NE(server.err.find("--parallel"), std::string::npos) << server.err;
  }
}

}  // namespace
}  // namespace dspark
