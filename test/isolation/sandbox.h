#pragma once
// What every preload test needs: a temporary directory holding the pod's region and the fake
// driver's shared state, the environment of a process run with the interposer, and read-only
// views of both files.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <catch2/catch.hpp>

#include "fake_state.h"
#include "process_runner.h"
#include "region.h"

namespace tessera::isolation_test {

inline constexpr long long kLimit = 1LL << 30;  // 1 GiB
inline constexpr long long kMiB = 1LL << 20;
inline const std::string kProbe = ISO_PROBE;
inline const std::string kInterposer = ISO_INTERPOSER;
inline const std::string kFakeDir = ISO_FAKE_DIR;
inline constexpr int kOom = 2;

struct Sandbox {
  TempDir dir;
  std::string region = dir.path("region");
  std::string fakeState = dir.path("fake-state");

  Env env(bool preload = true) const {
    Env e{{"LD_LIBRARY_PATH", kFakeDir},
          {"GPU_MEMORY_LIMIT", std::to_string(kLimit)},
          {"TESSERA_ISOLATION_REGION", region},
          {"FAKE_CUDA_STATE", fakeState},
          {"TESSERA_CONTEXT_RESERVE_MIB", "0"}};  // contexts: interposer_pod_test.cpp
    if (preload) e["LD_PRELOAD"] = kInterposer;
    return e;
  }

  tessera::fake::State* fake() {
    if (fakeMap_ == nullptr) fakeMap_ = tessera::fake::mapState(fakeState.c_str());
    return fakeMap_;
  }

  const tessera::interposer::RegionLayout* regionLayout() {
    if (regionMap_ == nullptr) {
      int fd = ::open(region.c_str(), O_RDONLY);
      REQUIRE(fd >= 0);
      void* mem = mmap(nullptr, sizeof(tessera::interposer::RegionLayout), PROT_READ, MAP_SHARED, fd, 0);
      ::close(fd);
      REQUIRE(mem != MAP_FAILED);
      regionMap_ = static_cast<tessera::interposer::RegionLayout*>(mem);
    }
    return regionMap_;
  }

  std::uint64_t calls(tessera::fake::Call c) { return fake()->calls[static_cast<int>(c)].load(); }

  ~Sandbox() {
    if (fakeMap_ != nullptr) munmap(fakeMap_, sizeof(tessera::fake::State));
    if (regionMap_ != nullptr) munmap(regionMap_, sizeof(tessera::interposer::RegionLayout));
  }

 private:
  tessera::fake::State* fakeMap_ = nullptr;
  tessera::interposer::RegionLayout* regionMap_ = nullptr;
};

inline std::string describe(const ProcessResult& r) { return "stdout:\n" + r.out + "stderr:\n" + r.err; }

}  // namespace tessera::isolation_test
