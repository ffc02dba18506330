#include "tessera/api/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace tessera::log {
namespace {

std::mutex& lock() {
  static std::mutex mu;
  return mu;
}
Sink& sink() {
  static Sink s;
  return s;
}
std::atomic<int> gVerbosity{0};

}  // namespace

Sink setSink(Sink next) {
  std::lock_guard guard(lock());
  Sink previous = std::move(sink());
  sink() = std::move(next);
  return previous;
}

void setVerbosity(int level) { gVerbosity.store(level, std::memory_order_relaxed); }
int verbosity() { return gVerbosity.load(std::memory_order_relaxed); }

void write(Severity severity, std::string_view message) {
  std::lock_guard guard(lock());
  if (sink()) {
    sink()(severity, message);
    return;
  }
  // Default: one unbuffered line on stderr, as the daemon has always written them.
  std::fprintf(stderr, "tessera: %.*s\n", static_cast<int>(message.size()), message.data());
}

}  // namespace tessera::log
