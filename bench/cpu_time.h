#pragma once
// CPU time of this process, for the benches (every thread: a cycle's helper thread, the e2e test
// server and load generators).
#include <ctime>

namespace tessera::bench {

/// CPU time of this process in ms, user + system, every thread.
inline double processCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace tessera::bench
