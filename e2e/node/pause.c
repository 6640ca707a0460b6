// The pod sandbox's first process (the "pause" container): it holds the pod's namespaces
// open, reaps the orphans that land on it as PID 1, and exits on SIGINT or SIGTERM. Built
// statically into an image of its own by scripts/kube-up.sh --node, since the node has no
// registry to pull Kubernetes' own from.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signal_number) {
  (void)signal_number;
  _exit(0);
}

static void reap(int signal_number) {
  (void)signal_number;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction on_stop = {.sa_handler = stop};
  struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &on_stop, NULL) != 0 || sigaction(SIGTERM, &on_stop, NULL) != 0 ||
      sigaction(SIGCHLD, &on_child, NULL) != 0) {
    return 1;
  }
  for (;;) {
    pause();
  }
}
