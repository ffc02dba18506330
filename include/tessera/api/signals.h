#pragma once
// SIGTERM/SIGINT handling without a signal handler: the signals are blocked in every thread
// (call before starting any) and one thread takes them with sigwait. Used by every long-running
// subcommand (run, serve-cluster, webhook, reserve). No Asio needed.
#include <csignal>
#include <cstdint>
#include <ctime>
#include <pthread.h>

namespace tessera::api {

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

/// Waits for SIGTERM or SIGINT, up to `millis` (forever when negative); returns the signal number,
/// or 0 when the time ran out.
inline int waitForTerminationSignal(int64_t millis = -1) {
  sigset_t set = terminationSignals();
  if (millis < 0) {
    int sig = 0;
    sigwait(&set, &sig);
    return sig;
  }
  timespec ts{static_cast<time_t>(millis / 1000), static_cast<long>((millis % 1000) * 1'000'000)};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
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

}  // namespace tessera::api
