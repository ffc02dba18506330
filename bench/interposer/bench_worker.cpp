// Helper process of `tessera-bench interposer`: times alloc+free pairs, or kernel launches, against
// the fake driver.
//
//   tessera-interposer-bench-worker <threads> <iterations> <bytes> [alloc|launch]
//
// Prints `cpu_ns_per_pair=` (mean per-thread CPU time per pair, or per launch: the cost of the
// calls, excluding time the thread was descheduled) and `wall_ns_per_pair=` (wall time / iterations
// per thread). A launch is cuLaunchKernel of a 128-block grid that takes no device time (the fake
// device's FAKE_CUDA_NS_PER_BLOCK is left at 0), so a core limit never empties the bucket.

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern "C" {
int cuInit(unsigned int);
int cuDevicePrimaryCtxRetain(void**, int);
int cuCtxSetCurrent(void*);
int cuMemAlloc_v2(unsigned long long*, std::size_t);
int cuMemFree_v2(unsigned long long);
int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
}

namespace {
std::uint64_t nowNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <threads> <iterations> <bytes> [alloc|launch]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const std::uint64_t iterations = std::strtoull(argv[2], nullptr, 10);
  const std::size_t bytes = std::strtoull(argv[3], nullptr, 10);
  const bool launch = argc > 4 && std::string(argv[4]) == "launch";
  if (cuInit(0) != 0) {
    std::fprintf(stderr, "cuInit failed\n");
    return 1;
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::uint64_t> cpu(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      void* ctx = nullptr;
      cuDevicePrimaryCtxRetain(&ctx, 0);
      cuCtxSetCurrent(ctx);
      unsigned long long p = 0;
      auto once = [&] {
        if (launch) return cuLaunchKernel(nullptr, 128, 1, 1, 256, 1, 1, 0, nullptr, nullptr, nullptr) == 0;
        return cuMemAlloc_v2(&p, bytes) == 0 && cuMemFree_v2(p) == 0;
      };
      for (int i = 0; i < 100; ++i) once();  // warm-up: first-use paths (init, device registration, watcher)
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      const std::uint64_t start = nowNs(CLOCK_THREAD_CPUTIME_ID);
      for (std::uint64_t i = 0; i < iterations; ++i) {
        if (!once()) failures.fetch_add(1);
      }
      cpu[static_cast<std::size_t>(t)] = nowNs(CLOCK_THREAD_CPUTIME_ID) - start;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const std::uint64_t wallStart = nowNs(CLOCK_MONOTONIC);
  go.store(true);
  for (auto& w : workers) w.join();
  const std::uint64_t wall = nowNs(CLOCK_MONOTONIC) - wallStart;
  double cpuTotal = 0;
  for (std::uint64_t c : cpu) cpuTotal += static_cast<double>(c);
  std::printf("failures=%d\n", failures.load());
  std::printf("cpu_ns_per_pair=%.1f\n", cpuTotal / (static_cast<double>(threads) * static_cast<double>(iterations)));
  std::printf("wall_ns_per_pair=%.1f\n", static_cast<double>(wall) / static_cast<double>(iterations));
  return failures.load() == 0 ? 0 : 1;
}
