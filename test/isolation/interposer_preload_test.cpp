// End-to-end tests: iso_probe runs against the fake driver with libtessera-cuda.so preloaded.
// Every child is started with fork/execve and reaped with waitpid; nothing sleeps or times.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "sandbox.h"

using namespace tessera::isolation_test;  // NOLINT

TEST_CASE("without the interposer the fake driver grants anything that fits the device", "[isolation][preload]") {
  Sandbox box;
  ProcessResult r = run({kProbe, "direct", std::to_string(600 * kMiB)}, box.env(false));
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.num("alloc2") == 0);
  CHECK(r.num("total") == (8LL << 30));
}

TEST_CASE("direct calls: allocations are charged, over-limit fails with OOM once reported, frees credit",
          "[isolation][preload]") {
  Sandbox box;
  ProcessResult r = run({kProbe, "direct", std::to_string(600 * kMiB)}, box.env());
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.num("init") == 0);
  CHECK(r.num("alloc1") == 0);
  CHECK(r.num("total") == kLimit);
  CHECK(r.num("free_after_alloc1") == kLimit - 600 * kMiB);
  CHECK(r.num("alloc2") == kOom);
  CHECK(r.num("alloc2_again") == kOom);
  CHECK(r.num("free1") == 0);
  CHECK(r.num("free_after_free1") == kLimit);
  CHECK(r.num("alloc3") == 0);
  CHECK(r.num("free3") == 0);
  CHECK(r.num("unknown_free") == 1);  // passed straight to the driver, which rejects it
  CHECK(r.num("used_end") == 0);
  CHECK(r.num("alloc_v1_over") == kOom);
  CHECK(r.num("alloc_v1") == 0);
  CHECK(r.num("used_v1") == kMiB);
  CHECK(r.num("free_v1") == 0);
  CHECK(r.num("info_v1") == 0);
  CHECK(r.num("total_v1") == kLimit);
  // One clear line, the first time only.
  CHECK(r.errCount("GPU memory limit reached") == 1);
  CHECK(r.errCount("CUDA_ERROR_OUT_OF_MEMORY") == 1);
  // The driver itself never held more than the limit.
  CHECK(box.fake()->devices[0].highWater.load() <= static_cast<std::uint64_t>(kLimit));
  CHECK(box.fake()->devices[0].used.load() == 0);
}

TEST_CASE("dlsym: lookups of hooked names return the wrappers, others pass through", "[isolation][preload]") {
  Sandbox box;
  ProcessResult r = run({kProbe, "dlsym", std::to_string(600 * kMiB)}, box.env());
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.value("cuMemAlloc_v2_owner") == "libtessera-cuda.so");
  CHECK(r.value("cuMemFree_v2_owner") == "libtessera-cuda.so");
  CHECK(r.value("cuDeviceGetName_owner") == "libcuda.so.1");
  CHECK(r.value("missing") == "null");
  CHECK(r.value("default_owner") == "libtessera-cuda.so");
  CHECK(r.value("puts_owner") == "libc.so.6");
  CHECK(r.value("nvml_owner") == "libtessera-cuda.so");
  CHECK(r.value("nvml_name_owner") == "libnvidia-ml.so.1");
  CHECK(r.num("alloc1") == 0);
  CHECK(r.num("alloc2") == kOom);
  CHECK(r.num("total") == kLimit);
  CHECK(r.num("free1") == 0);
  CHECK(r.num("alloc3") == 0);
  CHECK(box.fake()->devices[0].highWater.load() <= static_cast<std::uint64_t>(kLimit));
}

TEST_CASE("dlsym override keeps RTLD_NEXT relative to the caller", "[isolation][preload]") {
  Sandbox box;
  ProcessResult r = run({ISO_RTLD_NEXT}, box.env());
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.value("b_linked") == "1");
  CHECK(r.value("next") == "B");
}

TEST_CASE("cuGetProcAddress_v2 honours version and per-thread-stream flags", "[isolation][preload]") {
  Sandbox box;
  ProcessResult r = run({kProbe, "gpa", std::to_string(600 * kMiB)}, box.env());
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.value("gpa_owner") == "libtessera-cuda.so");

  CHECK(r.num("alloc_12000_rc") == 0);
  CHECK(r.value("alloc_12000_symbol") == "cuMemAlloc_v2");
  CHECK(r.value("alloc_12000_owner") == "libtessera-cuda.so");
  CHECK(r.value("alloc_3000_symbol") == "cuMemAlloc");  // legacy 32-bit variant, wrapped too
  CHECK(r.value("alloc_3000_owner") == "libtessera-cuda.so");
  CHECK(r.value("alloc_ptds_symbol") == "cuMemAlloc_v2");  // no per-thread variant exists
  CHECK(r.value("async_legacy_symbol") == "cuMemAllocAsync");
  CHECK(r.value("async_ptsz_symbol") == "cuMemAllocAsync_ptsz");
  CHECK(r.value("async_ptsz_owner") == "libtessera-cuda.so");
  CHECK(r.value("freeasync_ptsz_symbol") == "cuMemFreeAsync_ptsz");
  CHECK(r.value("pool_ptsz_symbol") == "cuMemAllocFromPoolAsync_ptsz");
  CHECK(r.num("async_11000_rc") == 500);  // CUDA_ERROR_NOT_FOUND, as the driver said
  CHECK(r.num("async_11000_status") == 2);  // VERSION_NOT_SUFFICIENT
  CHECK(r.value("async_11000_owner") == "none");
  CHECK(r.value("graphnode_12020_symbol") == "cuGraphAddNode");
  CHECK(r.value("graphnode_12080_symbol") == "cuGraphAddNode_v2");
  CHECK(r.value("gpa_12000_symbol") == "cuGetProcAddress_v2");
  CHECK(r.value("gpa_11030_symbol") == "cuGetProcAddress");
  CHECK(r.value("gpa_11030_owner") == "libtessera-cuda.so");
  CHECK(r.num("name_rc") == 0);
  CHECK(r.value("name_owner") == "libcuda.so.1");  // not hooked: passed through unchanged
  CHECK(r.num("nosuch_rc") == 500);
  CHECK(r.num("nosuch_status") == 1);
  // Kernel launches (the compute limit), per-thread-stream variants included.
  CHECK(r.value("launch_12000_symbol") == "cuLaunchKernel");
  CHECK(r.value("launch_12000_owner") == "libtessera-cuda.so");
  CHECK(r.value("launch_ptsz_symbol") == "cuLaunchKernel_ptsz");
  CHECK(r.value("launchex_12000_symbol") == "cuLaunchKernelEx");
  CHECK(r.value("coop_ptsz_symbol") == "cuLaunchCooperativeKernel_ptsz");
  CHECK(r.value("coop_ptsz_owner") == "libtessera-cuda.so");

  CHECK(r.num("alloc1") == 0);
  CHECK(r.num("alloc2") == kOom);
  CHECK(r.num("free1") == 0);
  CHECK(r.num("ptsz_alloc1") == 0);
  CHECK(r.num("ptsz_alloc2") == kOom);
  CHECK(r.num("ptsz_used") == 600 * kMiB);
  CHECK(r.num("ptsz_free1") == 0);
  CHECK(r.num("ptsz_used_after") == 0);
  CHECK(r.num("legacy_rc") == 0);
  CHECK(r.value("legacy_symbol") == "cuMemAllocAsync_ptsz");
  CHECK(r.value("legacy_owner") == "libtessera-cuda.so");
  // The per-thread-stream variant is what the driver actually ran.
  CHECK(box.calls(tessera::fake::Call::cuMemAllocAsync_ptsz) == 1);
  CHECK(box.calls(tessera::fake::Call::cuMemFreeAsync_ptsz) == 1);
  CHECK(box.calls(tessera::fake::Call::cuMemAllocAsync) == 0);
  CHECK(box.fake()->devices[0].highWater.load() <= static_cast<std::uint64_t>(kLimit));
}

TEST_CASE("every allocator charges and every free credits", "[isolation][preload]") {
  Sandbox box;
  Env env = box.env();
  env["FAKE_CUDA_PITCH_ALIGN"] = "4096";  // larger than the interposer's estimate: settled afterwards
  ProcessResult r = run({kProbe, "kinds", std::to_string(kLimit)}, env);
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.num("pitch_rc") == 0);
  CHECK(r.num("pitch") == 4096);
  CHECK(r.num("pitch_charged") == 4096 * 100);  // the real pitch x height, not width x height
  CHECK(r.num("after_pitch") == 0);
  CHECK(r.num("managed_charged") == 3 * kMiB);
  CHECK(r.num("async_charged") == 5 * kMiB);
  CHECK(r.num("pool_charged") == 7 * kMiB);
  CHECK(r.num("create_charged") == 2 * kMiB);
  CHECK(r.num("create_host_rc") == 0);
  CHECK(r.num("create_host_charged") == 0);
  // Arrays: charged what the driver says it needs (the fake uses 2 MiB pages).
  CHECK(r.num("array_rc") == 0);
  CHECK(r.num("array_charged") == 16 * kMiB);
  CHECK(r.num("array3d_charged") == 2 * kMiB);
  CHECK(r.num("mip_rc") == 0);
  CHECK(r.num("mip_charged") >= 64 * kMiB + 16 * kMiB + 4 * kMiB + 2 * kMiB);
  CHECK(r.num("graph_rc") == 0);
  CHECK(r.num("graph_charged") == 9 * kMiB);
  CHECK(r.num("graphnode_rc") == 0);
  CHECK(r.num("graphnode_charged") == 11 * kMiB);
  for (const char* key : {"pitch_free", "managed_free", "async_free", "pool_free", "release_rc", "release_host_rc",
                          "array_destroy", "array3d_destroy", "mip_destroy", "graph_free", "graphnode_free"}) {
    INFO(key);
    CHECK(r.num(key) == 0);
  }
  for (const char* key : {"managed_over", "async_over", "create_over", "array_over", "graph_over", "pitch_over"}) {
    INFO(key);
    CHECK(r.num(key) == kOom);
  }
  CHECK(r.num("used_end") == 0);
  CHECK(box.fake()->devices[0].used.load() == 0);
  CHECK(box.fake()->devices[0].highWater.load() <= static_cast<std::uint64_t>(kLimit));
}

TEST_CASE("memory queries report the limit, and tolerate NULL out-parameters", "[isolation][preload]") {
  Sandbox box;
  ProcessResult r = run({kProbe, "queries", "0"}, box.env());
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.num("alloc") == 0);
  CHECK(r.num("total") == kLimit);
  CHECK(r.num("free") == kLimit - 100 * kMiB);
  CHECK(r.num("info_null_free") == 0);
  CHECK(r.num("info_null_both") == 0);
  CHECK(r.num("devtotal") == 0);
  CHECK(r.num("devtotal_bytes") == kLimit);
  CHECK(r.num("devtotal_null") == 1);  // the driver's own answer to a NULL pointer
  CHECK(r.num("nvml") == 0);
  CHECK(r.num("nvml_total") == kLimit);
  CHECK(r.num("nvml_used") == 100 * kMiB);
  CHECK(r.num("nvml_free") == kLimit - 100 * kMiB);
  CHECK(r.num("nvml_null") == 2);  // NVML_ERROR_INVALID_ARGUMENT, no crash
  CHECK(r.num("nvml2") == 0);
  CHECK(r.num("nvml2_total") == kLimit);
  CHECK(r.num("nvml2_used") == 100 * kMiB);
  CHECK(r.num("nvml2_free") == kLimit - 100 * kMiB);
  CHECK(r.num("nvml2_null") == 2);
}

TEST_CASE("per-device limits by UUID override GPU_MEMORY_LIMIT", "[isolation][preload]") {
  Sandbox box;
  Env env = box.env();
  env["TESSERA_GPU_MEMORY_LIMITS"] = "GPU-7e55e7a0-0000-4000-8000-000000000001=" + std::to_string(512 * kMiB);
  ProcessResult r = run({kProbe, "devices", std::to_string(600 * kMiB)}, env);
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.num("dev0_alloc") == 0);
  CHECK(r.num("dev0_total") == kLimit);
  CHECK(r.num("dev1_alloc") == kOom);
  CHECK(r.num("dev1_total") == 512 * kMiB);
}

TEST_CASE("debug logging traces hooked calls", "[isolation][preload]") {
  Sandbox box;
  Env env = box.env();
  env["TESSERA_ISOLATION_LOG"] = "debug";
  ProcessResult r = run({kProbe, "gpa", std::to_string(600 * kMiB)}, env);
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.errCount("debug: cuMemAlloc_v2(") >= 1);
  CHECK(r.errCount("debug: cuGetProcAddress(cuMemAllocAsync, 12000, 0x2): -> cuMemAllocAsync_ptsz wrapper") >= 1);
  CHECK(r.errCount("debug: dlsym(") >= 1);
  CHECK(r.errCount("debug: cuInit(") >= 1);
}

TEST_CASE("bad GPU_MEMORY_LIMIT values fail closed with a message", "[isolation][preload]") {
  const std::vector<std::pair<std::string, const char*>> cases = {
      {"1gb", "GPU_MEMORY_LIMIT='1gb' is not a decimal byte count"},
      {"010g", "GPU_MEMORY_LIMIT='010g' is not a decimal byte count"},
      {"-5", "GPU_MEMORY_LIMIT='-5' is not a decimal byte count"},
      {"", "GPU_MEMORY_LIMIT='' is not a decimal byte count"},
      {"<absent>", "GPU_MEMORY_LIMIT is not set"},
  };
  for (const auto& [value, message] : cases) {
    DYNAMIC_SECTION("GPU_MEMORY_LIMIT " << value) {
      Sandbox box;
      Env env = box.env();
      if (value == "<absent>") {
        env.erase("GPU_MEMORY_LIMIT");
      } else {
        env["GPU_MEMORY_LIMIT"] = value;
      }
      ProcessResult r = run({kProbe, "failclosed"}, env);
      INFO(describe(r));
      REQUIRE(r.exitCode == 0);
      CHECK(r.num("init") == 800);  // CUDA_ERROR_NOT_PERMITTED
      CHECK(r.num("alloc") == kOom);
      CHECK(r.num("alloc_again") == kOom);
      CHECK(r.num("async") == kOom);
      // The driver was never initialised, so queries fail; were it initialised they would say 0.
      CHECK((r.num("info") != 0 || r.num("total") == 0));
      CHECK(r.errCount(message) == 1);  // reported once, clearly
      CHECK(r.errCount("Failing closed") == 1);
      CHECK(box.calls(tessera::fake::Call::cuMemAlloc_v2) == 0);  // the driver was never asked
    }
  }
}

TEST_CASE("a shared region of another format fails closed", "[isolation][preload]") {
  Sandbox box;
  {
    int fd = ::open(box.region.c_str(), O_CREAT | O_WRONLY, 0600);
    REQUIRE(fd >= 0);
    const char junk[64] = "not a tessera region";
    REQUIRE(write(fd, junk, sizeof junk) == static_cast<ssize_t>(sizeof junk));
    ::close(fd);
  }
  ProcessResult r = run({kProbe, "failclosed"}, box.env());
  INFO(describe(r));
  CHECK(r.num("init") == 800);
  CHECK(r.num("alloc") == kOom);
  CHECK(r.errCount("unknown format") == 1);
}

TEST_CASE("32 threads x 4 processes never push the driver past the limit", "[isolation][preload][stress]") {
  Sandbox box;
  constexpr int kProcesses = 4;
  std::vector<std::unique_ptr<Child>> children;
  for (int p = 0; p < kProcesses; ++p) {
    // Each allocation is 60-64 MiB; 128 threads could ask for ~8 GiB at once, the device has 8 GiB
    // and the container 1 GiB.
    children.push_back(std::make_unique<Child>(
        std::vector<std::string>{kProbe, "hammer", "32", "400", std::to_string(60 * kMiB)}, box.env()));
  }
  for (auto& c : children) REQUIRE(c->waitForOutput("init=0"));
  for (auto& c : children) c->closeStdin();  // start together
  long long ok = 0, oom = 0;
  for (auto& c : children) {
    ProcessResult r = c->wait();
    INFO(describe(r));
    REQUIRE(r.exitCode == 0);
    CHECK(r.num("other") == 0);
    ok += r.num("ok");
    oom += r.num("oom");
    CHECK(r.errCount("GPU memory limit reached") <= 1);
  }
  INFO("ok=" << ok << " oom=" << oom);
  CHECK(ok > 0);
  CHECK(ok + oom == kProcesses * 32 * 400);
  const std::uint64_t highWater = box.fake()->devices[0].highWater.load();
  INFO("driver high-water mark " << highWater);
  CHECK(highWater <= static_cast<std::uint64_t>(kLimit));
  CHECK(box.fake()->devices[0].used.load() == 0);
  CHECK(box.regionLayout()->devices[0].used.load() == 0);
  CHECK(box.regionLayout()->devices[0].peak.load() <= static_cast<std::uint64_t>(kLimit));
}

TEST_CASE("a SIGKILLed process has its usage reclaimed", "[isolation][preload]") {
  Sandbox box;
  {
    Child holder({kProbe, "hold", std::to_string(700 * kMiB)}, box.env());
    REQUIRE(holder.waitForOutput("ready=1"));
    CHECK(box.regionLayout()->devices[0].used.load() == static_cast<std::uint64_t>(700 * kMiB));
    holder.kill(SIGKILL);
    ProcessResult killed = holder.wait();  // reaped: the pid is gone
    REQUIRE(killed.signal == SIGKILL);
    INFO(describe(killed));
    CHECK(killed.num("alloc") == 0);
  }
  // The dead process's 700 MiB is still on the books until someone needs it...
  CHECK(box.regionLayout()->devices[0].used.load() == static_cast<std::uint64_t>(700 * kMiB));
  // ...and a new process that needs it gets it.
  ProcessResult r = run({kProbe, "direct", std::to_string(700 * kMiB)}, box.env());
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.num("alloc1") == 0);
  CHECK(r.num("alloc2") == kOom);
  CHECK(r.num("used_end") == 0);
  bool slotLeft = false;
  for (const auto& proc : box.regionLayout()->procs) {
    if (proc.pid.load() != 0) slotLeft = slotLeft || proc.used[0].load() != 0;
  }
  CHECK_FALSE(slotLeft);
}
