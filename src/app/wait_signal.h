#pragma once
// SIGTERM/SIGINT handling without a signal handler: the signals are blocked in every thread
// (call before starting any) and one thread takes them with sigwait. No Asio needed in app/.
#include <csignal>
#include <pthread.h>

namespace tessera::app {

inline sigset_t terminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

/// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts afterwards.
inline void blockTerminationSignals() {
  sigset_t set = terminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

/// Waits for SIGTERM or SIGINT; returns the signal number.
inline int waitForTerminationSignal() {
  sigset_t set = terminationSignals();
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

/// The daemon's set: SIGTERM, SIGINT and SIGHUP (reload the config file).
inline sigset_t daemonSignals() {
  sigset_t set = terminationSignals();
  sigaddset(&set, SIGHUP);
  return set;
}

/// Blocks the daemon's signals in the calling thread and every thread it starts afterwards.
inline void blockDaemonSignals() {
  sigset_t set = daemonSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

/// Waits for SIGTERM, SIGINT or SIGHUP; returns the signal number.
inline int waitForDaemonSignal() {
  sigset_t set = daemonSignals();
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace tessera::app
