#include "cli/distributed_args.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>
#include <vector>

#include "util/error.h"

namespace dspark::cli {

void DistributedArgs::add_to(CLI::App* app) {
  auto* world = app->add_option("--world-size", world_size, "data-parallel processes in all (see --master)");
  auto* rank_option = app->add_option("--rank", rank, "this process's rank, 0..W-1 (rank 0 writes the output)");
  auto* master_option = app->add_option("--master", master, "ADDR:PORT where rank 0 serves the rendezvous store");
  app->add_option("--dist-timeout", timeout_seconds,
                  "seconds to wait for the other ranks (rendezvous and each collective)")
      ->capture_default_str();
  app->add_option("--nproc", nproc, "start N data-parallel processes on this machine (a local launcher)")
      ->excludes(world)
      ->excludes(rank_option)
      ->excludes(master_option);
}

DistOptions DistributedArgs::options(bool cuda) const {
  DistOptions o;
  o.world_size = world_size;
  o.rank = rank;
  o.master = master;
  o.timeout_seconds = timeout_seconds;
  o.cuda = cuda;
  return o;
}

namespace {

volatile sig_atomic_t g_children = 0;
pid_t g_pids[256];

void forward_terminate(int) {
  for (sig_atomic_t i = 0; i < g_children; ++i)
    if (g_pids[i] > 0) ::kill(g_pids[i], SIGTERM);
}

// A port nobody listens on now (the kernel's pick); rank 0 binds it a moment later.
uint16_t free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("cannot open a socket: {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    fail("cannot find a free loopback port: {}", std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// This process's command line without --nproc and its value.
std::vector<std::string> own_arguments_without_nproc() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    start = end == std::string::npos ? all.size() : end + 1;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

int exit_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

int launch_local_ranks(int nproc, double grace_seconds) {
  if (nproc < 1 || nproc > 256) fail("--nproc must be 1..256");
  const std::vector<std::string> base = own_arguments_without_nproc();
  const std::string master = "127.0.0.1:" + std::to_string(free_loopback_port());
  // Ctrl-C reaches every rank through the terminal; the launcher itself just waits for them.
  struct sigaction ignore {}, forward {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, nullptr);
  forward.sa_handler = forward_terminate;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGTERM, &forward, nullptr);

  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    std::vector<std::string> args = base;
    for (const std::string& a : {std::string("--world-size"), std::to_string(nproc), std::string("--rank"),
                                 std::to_string(r), std::string("--master"), master})
      args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      forward_terminate(0);
      fail("cannot start rank {}: {}", r, std::strerror(errno));
    }
    if (pid == 0) {
      struct sigaction dflt {};
      dflt.sa_handler = SIG_DFL;
      sigaction(SIGINT, &dflt, nullptr);
      sigaction(SIGTERM, &dflt, nullptr);
      ::execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    pids.push_back(pid);
    g_pids[r] = pid;
    g_children = r + 1;
  }

  using Clock = std::chrono::steady_clock;
  int result = 0, alive = nproc;
  bool stopping = false;
  Clock::time_point kill_at{};
  while (alive > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pid == 0) {  // stopping: the others get a moment to report their own error
      if (Clock::now() >= kill_at)
        for (sig_atomic_t i = 0; i < g_children; ++i)
          if (g_pids[i] > 0) ::kill(g_pids[i], SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    int rank = -1;
    for (int r = 0; r < nproc; ++r)
      if (pids[size_t(r)] == pid) rank = r;
    if (rank < 0) continue;
    g_pids[rank] = 0;
    --alive;
    const int code = exit_status(status);
    if (code != 0 && result == 0) {
      result = code;
      if (alive > 0) {
        std::cerr << fmt::format("error: rank {} exited with status {}; stopping the other {} rank(s)\n", rank, code,
                                 alive);
        stopping = true;
        kill_at = Clock::now() + std::chrono::milliseconds(int64_t(grace_seconds * 1000));
      }
    }
  }
  return result;
}

}  // namespace dspark::cli
