// The compute limit (GPU_CORE_LIMIT, docs/isolation.md "Compute limit"): its configuration and
// controller in-process, then end to end with iso_probe processes launching kernels on the fake
// driver's device, which runs one kernel at a time and reports per-process SM utilization through
// the fake NVML (fake/fake_cuda.cpp, "kernel launches").
//
// The utilization figures are device time over wall time of a 1.5 s measurement after a 1 s
// warm-up. The bands are wide on purpose (a loaded 2-core CI machine), yet each fails without
// the limiter: there the 25% pod, launching from three threads against two, takes ~60%, and
// ~100% alone. (Two threads for the other pod keep it busy while its threads wait to be woken on
// a loaded machine.)

#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include <catch2/catch.hpp>

#include "config.h"
#include "core_control.h"
#include "sandbox.h"

using namespace tessera::isolation_test;  // NOLINT
using tessera::interposer::Config;
using tessera::interposer::CoreControl;
using tessera::interposer::CorePolicy;
using tessera::interposer::CoreSample;

namespace {

std::map<std::string, std::string>* gEnv = nullptr;

Config configFrom(std::map<std::string, std::string> env) {
  gEnv = &env;
  auto cfg = std::make_unique<Config>();
  tessera::interposer::loadConfig(
      [](const char* name) -> const char* {
        auto it = gEnv->find(name);
        return it == gEnv->end() ? nullptr : it->second.c_str();
      },
      cfg.get());
  gEnv = nullptr;
  return *cfg;
}

CoreSample measured(int pod, int total) {
  CoreSample s;
  s.valid = true;
  s.pod = pod;
  s.total = total;
  return s;
}

// 100 blocks of 10 us: one kernel occupies the fake device for 1 ms.
constexpr const char* kNsPerBlock = "10000";
constexpr const char* kBlocks = "100";
constexpr const char* kRunMs = "2500";
constexpr const char* kWarmupMs = "1000";

Env podEnv(const Sandbox& box, const std::string& region, const char* cores, const char* policy) {
  Env e = box.env();
  e["TESSERA_ISOLATION_REGION"] = box.dir.path(region);
  e["FAKE_CUDA_NS_PER_BLOCK"] = kNsPerBlock;
  if (cores != nullptr) e["GPU_CORE_LIMIT"] = cores;
  if (policy != nullptr) e["GPU_CORE_LIMIT_POLICY"] = policy;
  return e;
}

std::unique_ptr<Child> startLauncher(const Env& env, int threads) {
  auto child = std::make_unique<Child>(
      std::vector<std::string>{kProbe, "launch", std::to_string(threads), kRunMs, kWarmupMs, kBlocks}, env);
  REQUIRE(child->waitForOutput("ready=1"));
  return child;
}

}  // namespace

TEST_CASE("GPU_CORE_LIMIT and its policy: accepted values", "[isolation][config][cores]") {
  const std::map<std::string, std::string> base{{"GPU_MEMORY_LIMIT", "1000"}};
  Config none = configFrom(base);
  REQUIRE(none.valid);
  CHECK(none.coreLimit == 0);
  CHECK(none.corePolicy == CorePolicy::kStrict);
  auto with = [&](std::map<std::string, std::string> extra) {
    auto env = base;
    env.insert(extra.begin(), extra.end());
    return configFrom(env);
  };
  CHECK(with({{"GPU_CORE_LIMIT", "25"}}).coreLimit == 25);
  CHECK(with({{"GPU_CORE_LIMIT", "1"}}).coreLimit == 1);
  CHECK(with({{"GPU_CORE_LIMIT", "99"}}).coreLimit == 99);
  CHECK(with({{"GPU_CORE_LIMIT", "100"}}).coreLimit == 0);  // the whole GPU: no limit
  CHECK(with({{"GPU_CORE_LIMIT", "0"}}).coreLimit == 0);
  CHECK(with({{"GPU_CORE_LIMIT", ""}}).coreLimit == 0);
  CHECK(with({{"GPU_CORE_LIMIT", "25"}, {"GPU_CORE_LIMIT_POLICY", "burst"}}).corePolicy == CorePolicy::kBurst);
  CHECK(with({{"GPU_CORE_LIMIT", "25"}, {"GPU_CORE_LIMIT_POLICY", "strict"}}).corePolicy == CorePolicy::kStrict);
  CHECK(with({{"GPU_CORE_LIMIT_POLICY", ""}}).corePolicy == CorePolicy::kStrict);
}

TEST_CASE("GPU_CORE_LIMIT and its policy: malformed values fail closed naming the variable",
          "[isolation][config][cores]") {
  for (const char* bad : {"25%", "101", "-5", "025", " 25", "0.25", "1e2", "twenty", "99999999999999999999"}) {
    DYNAMIC_SECTION("GPU_CORE_LIMIT='" << bad << "'") {
      Config cfg = configFrom({{"GPU_MEMORY_LIMIT", "1000"}, {"GPU_CORE_LIMIT", bad}});
      CHECK_FALSE(cfg.valid);
      CHECK_THAT(cfg.error, Catch::Contains("GPU_CORE_LIMIT='" + std::string(bad) + "'") &&
                                Catch::Contains("is not a percentage"));
    }
  }
  for (const char* bad : {"force", "default", "Strict", "burst ", "disable"}) {
    DYNAMIC_SECTION("GPU_CORE_LIMIT_POLICY='" << bad << "'") {
      Config cfg = configFrom({{"GPU_MEMORY_LIMIT", "1000"}, {"GPU_CORE_LIMIT", "25"}, {"GPU_CORE_LIMIT_POLICY", bad}});
      CHECK_FALSE(cfg.valid);
      CHECK_THAT(cfg.error, Catch::Contains("GPU_CORE_LIMIT_POLICY='" + std::string(bad) + "'") &&
                                Catch::Contains("valid: strict, burst"));
    }
  }
}

TEST_CASE("core controller: calibrates from what was spent and measured, then converges", "[isolation][cores]") {
  CoreControl c;
  c.limit = 25;
  // Open until the pod has been measured: nothing to calibrate on before.
  c.step(0, measured(0, 0));
  CHECK(c.open);
  c.step(1000, CoreSample{});  // NVML silent: no change
  CHECK(c.open);
  // 1000 tokens per period gave 100%: a quarter of that is the share.
  c.step(1000, measured(100, 100));
  CHECK_FALSE(c.open);
  CHECK(c.rate == Approx(0.25 * c.consumed));  // consumed: 0, then 500, then 750 (smoothed)
  CHECK(c.consumed == Approx(750));
  // A linear plant (utilization = spending / 10): the rate settles where the pod sits at 25%.
  for (int i = 0; i < 40; ++i) {
    const double spent = c.rate;
    c.step(spent, measured(static_cast<int>(std::lround(spent / 10)), 100));
  }
  CHECK(c.rate == Approx(250).margin(15));
  // Never below the floor, never more than halved or doubled in one period.
  const double before = c.rate;
  c.step(before, measured(100, 100));
  CHECK(c.rate >= 0.5 * before);
  for (int i = 0; i < 50; ++i) c.step(c.rate, measured(100, 100));
  CHECK(c.rate >= tessera::interposer::kMinCoreRate);
}

TEST_CASE("core controller: burst opens while the GPU is otherwise idle, strict never does", "[isolation][cores]") {
  CoreControl burst;
  burst.limit = 25;
  burst.policy = CorePolicy::kBurst;
  burst.step(1000, measured(100, 100));  // alone on the GPU
  CHECK(burst.open);
  burst.step(1000, measured(50, 100));  // someone else takes half
  CHECK_FALSE(burst.open);
  CHECK(burst.rate == Approx(0.5 * 1000));  // 1000 tokens gave 50%: 25% costs 500
  burst.step(400, measured(25, 27));        // the other process stopped
  CHECK(burst.open);
  CoreSample unknown = measured(100, 100);
  unknown.othersKnown = false;  // NVML cannot tell the pod apart: treated as strict
  burst.step(1000, unknown);
  CHECK_FALSE(burst.open);

  CoreControl strict;
  strict.limit = 25;
  strict.step(1000, measured(100, 100));
  CHECK_FALSE(strict.open);
}

TEST_CASE("GPU_CORE_LIMIT strict: a 25% pod contending with an unlimited pod is held near 25%",
          "[isolation][preload][cores]") {
  Sandbox box;
  // The limited pod launches from three threads, the other from two: without the limiter the
  // limited pod would take about three fifths of the device.
  auto limited = startLauncher(podEnv(box, "limited.region", "25", nullptr), 3);
  auto other = startLauncher(podEnv(box, "other.region", nullptr, nullptr), 2);
  limited->closeStdin();
  other->closeStdin();
  ProcessResult l = limited->wait(), o = other->wait();
  INFO(describe(l) << describe(o));
  REQUIRE(l.exitCode == 0);
  REQUIRE(o.exitCode == 0);
  CHECK(l.num("failures") == 0);
  CHECK(l.num("util") >= 10);
  CHECK(l.num("util") <= 45);
  CHECK(o.num("util") >= 40);  // the rest goes to the other pod
  CHECK(box.calls(tessera::fake::Call::cuLaunchKernel) > 0);
  CHECK(box.calls(tessera::fake::Call::cuLaunchKernelEx) > 0);
  CHECK(box.calls(tessera::fake::Call::cuLaunchCooperativeKernel) > 0);
}

TEST_CASE("GPU_CORE_LIMIT strict: alone on the GPU, the pod still stays near its share",
          "[isolation][preload][cores]") {
  Sandbox box;
  auto limited = startLauncher(podEnv(box, "limited.region", "25", "strict"), 3);
  limited->closeStdin();
  ProcessResult l = limited->wait();
  INFO(describe(l));
  REQUIRE(l.exitCode == 0);
  CHECK(l.num("util") >= 10);
  CHECK(l.num("util") <= 45);
}

TEST_CASE("GPU_CORE_LIMIT is the pod's: two processes of one pod share the 25%", "[isolation][preload][cores]") {
  Sandbox box;
  // Two processes naming the same region are one pod. Each steers by the pod's utilization, so
  // together they hold 25%; limited each on its own, they would take 25% each.
  const Env env = podEnv(box, "pod.region", "25", "strict");
  auto first = startLauncher(env, 2);
  auto second = startLauncher(env, 2);
  first->closeStdin();
  second->closeStdin();
  ProcessResult a = first->wait(), b = second->wait();
  INFO(describe(a) << describe(b));
  REQUIRE(a.exitCode == 0);
  REQUIRE(b.exitCode == 0);
  CHECK(a.num("util") + b.num("util") >= 10);
  CHECK(a.num("util") + b.num("util") <= 40);
}

TEST_CASE("GPU_CORE_LIMIT burst: alone on the GPU the pod runs free", "[isolation][preload][cores]") {
  Sandbox box;
  auto limited = startLauncher(podEnv(box, "limited.region", "25", "burst"), 3);
  limited->closeStdin();
  ProcessResult l = limited->wait();
  INFO(describe(l));
  REQUIRE(l.exitCode == 0);
  CHECK(l.num("util") >= 60);
}

TEST_CASE("GPU_CORE_LIMIT burst: under contention the pod is held near its share", "[isolation][preload][cores]") {
  Sandbox box;
  auto limited = startLauncher(podEnv(box, "limited.region", "25", "burst"), 3);
  auto other = startLauncher(podEnv(box, "other.region", nullptr, nullptr), 2);
  limited->closeStdin();
  other->closeStdin();
  ProcessResult l = limited->wait(), o = other->wait();
  INFO(describe(l) << describe(o));
  REQUIRE(l.exitCode == 0);
  CHECK(l.num("util") >= 10);
  CHECK(l.num("util") <= 45);
  CHECK(o.num("util") >= 40);
}

TEST_CASE("without GPU_CORE_LIMIT launches are not throttled", "[isolation][preload][cores]") {
  Sandbox box;
  auto a = startLauncher(podEnv(box, "a.region", nullptr, nullptr), 3);
  a->closeStdin();
  ProcessResult r = a->wait();
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.num("util") >= 60);
}
