#include "util/interrupt.h"

#include <csignal>
#include <cstdlib>
#include <unistd.h>

namespace dspark {
namespace {
volatile std::sig_atomic_t g_raised = 0;
struct sigaction g_old_int, g_old_term;

void on_signal(int) {
  if (g_raised) _exit(130);
  g_raised = 1;
  const char msg[] = "\ninterrupted: finishing this step and writing a checkpoint (again to abort)\n";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
}
}  // namespace

InterruptFlag::InterruptFlag() {
  g_raised = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_old_int);
  sigaction(SIGTERM, &action, &g_old_term);
}

InterruptFlag::~InterruptFlag() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool InterruptFlag::raised() const { return g_raised != 0; }

}  // namespace dspark
