/* The pod sandbox ("pause") process of the e2e node's pods, built here with
 * `gcc -static` by hack/build-image.sh (nothing downloaded). It holds the pod's namespaces open,
 * reaps orphaned children (it is PID 1 when the pod shares its PID namespace) and exits 0 on
 * SIGTERM or SIGINT, which is what the kubelet sends when it stops the sandbox. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction sa = {0};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = stop;
  if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0) return 1;
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) return 2;
  if (getpid() != 1) fprintf(stderr, "pause: not PID 1, still waiting for SIGTERM\n");
  for (;;) pause();
}
