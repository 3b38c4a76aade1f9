/*
 * The pod sandbox's pause process for the real-node tests: it holds the pod's namespaces,
 * reaps the orphans a shared PID namespace hands to it, and exits 0 on SIGTERM or SIGINT.
 * Linked statically, so its image holds this one file.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>

static volatile sig_atomic_t stopping;

static void on_stop(int sig) {
    (void)sig;
    stopping = 1;
}

static void on_child(int sig) {
    int saved = errno;
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

int main(void) {
    sigset_t handled, waiting;
    struct sigaction stop = {.sa_handler = on_stop};
    struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};

    /* Blocked outside sigsuspend, so a signal cannot slip in between the check and the wait. */
    sigemptyset(&handled);
    sigaddset(&handled, SIGTERM);
    sigaddset(&handled, SIGINT);
    sigaddset(&handled, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &handled, &waiting) != 0 || sigaction(SIGTERM, &stop, NULL) != 0 ||
        sigaction(SIGINT, &stop, NULL) != 0 || sigaction(SIGCHLD, &child, NULL) != 0) {
        return 1;
    }
    sigdelset(&waiting, SIGTERM);
    sigdelset(&waiting, SIGINT);
    sigdelset(&waiting, SIGCHLD);
    while (!stopping) {
        sigsuspend(&waiting);
    }
    return 0;
}
