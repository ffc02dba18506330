// Pod-level accounting, context memory and graph memory, end to end: iso_probe processes against
// the fake driver with libtessera-cuda.so preloaded (docs/isolation.md).

#include <signal.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include <catch2/catch.hpp>

#include "sandbox.h"

using namespace tessera::isolation_test;  // NOLINT

namespace {

// The environment the webhook gives container `name` of one pod (docs/isolation.md).
Env containerEnv(const Sandbox& box, const std::string& name) {
  Env e = box.env();
  e["TESSERA_POD_UID"] = "5d1c0a4e-9b7f-4c1e-8a41-3f2b6c7d8e90";
  e["TESSERA_POD_NAMESPACE"] = "ml";
  e["TESSERA_POD_NAME"] = "trainer-0";
  e["TESSERA_CONTAINER_NAME"] = name;
  return e;
}

std::unique_ptr<Child> startContainer(const Sandbox& box, const std::string& name,
                                      const std::vector<long long>& sizes) {
  std::vector<std::string> argv{kProbe, "allocs"};
  for (long long s : sizes) argv.push_back(std::to_string(s));
  auto child = std::make_unique<Child>(argv, containerEnv(box, name));
  REQUIRE(child->waitForOutput("ready=1"));
  return child;
}

int containerIndex(const tessera::interposer::RegionLayout* layout, const std::string& name) {
  for (int i = 0; i < tessera::interposer::kMaxContainers; ++i) {
    if (layout->containers[i].state.load() == 1 && name == layout->containers[i].name) return i;
  }
  return -1;
}

}  // namespace

TEST_CASE("a 3-container pod shares one limit exactly", "[isolation][preload][pod]") {
  Sandbox box;
  // Three containers of one pod, each a separate process naming the same region (the webhook
  // points every container at <region dir>/<pod UID>/gpu.region).
  auto a = startContainer(box, "main", {400 * kMiB});
  auto b = startContainer(box, "sidecar", {400 * kMiB});
  // 224 MiB are left: 400 is refused, 224 fits exactly, one byte more is refused.
  auto c = startContainer(box, "loader", {400 * kMiB, 224 * kMiB, 1});
  const auto* layout = box.regionLayout();
  CHECK(layout->devices[0].used.load() == static_cast<std::uint64_t>(kLimit));
  CHECK(layout->devices[0].peak.load() == static_cast<std::uint64_t>(kLimit));
  CHECK(box.fake()->devices[0].used.load() == static_cast<std::uint64_t>(kLimit));  // the driver agrees
  CHECK(box.fake()->devices[0].highWater.load() == static_cast<std::uint64_t>(kLimit));
  CHECK(layout->devices[0].refused.load() == 2);
  CHECK(std::string(layout->pod.uid) == "5d1c0a4e-9b7f-4c1e-8a41-3f2b6c7d8e90");
  CHECK(std::string(layout->pod.namespace_) == "ml");
  CHECK(std::string(layout->pod.name) == "trainer-0");
  const int loader = containerIndex(layout, "loader");
  REQUIRE(loader >= 0);
  REQUIRE(containerIndex(layout, "main") >= 0);
  CHECK(layout->containers[loader].refused[0].load() == 2);
  CHECK(layout->containers[containerIndex(layout, "main")].refused[0].load() == 0);

  // The main container dies (SIGKILL): its 400 MiB go back to the pod, and only to the pod.
  a->kill(SIGKILL);
  ProcessResult ra = a->wait();
  INFO(describe(ra));
  CHECK(ra.num("alloc0") == 0);
  auto d = startContainer(box, "main", {400 * kMiB, 1});
  ProcessResult rb = b->wait(), rc = c->wait(), rd = d->wait();
  INFO(describe(rb) << describe(rc) << describe(rd));
  CHECK(rb.num("alloc0") == 0);
  CHECK(rb.num("free") == 224 * kMiB);  // every container sees what the pod has left
  CHECK(rc.num("alloc0") == kOom);
  CHECK(rc.num("alloc1") == 0);
  CHECK(rc.num("alloc2") == kOom);
  CHECK(rc.num("free") == 0);
  CHECK(rc.num("total") == kLimit);
  CHECK(rd.num("alloc0") == 0);
  CHECK(rd.num("alloc1") == kOom);
  CHECK(rd.errCount("already in use by this pod") == 1);
  // (The fake driver does not free a killed process's memory as a real one does: no driver-side
  // check after the kill.)
}

TEST_CASE("context memory is charged per process: NVML's measurement", "[isolation][preload][context]") {
  Sandbox box;
  Env env = box.env();
  env.erase("TESSERA_CONTEXT_RESERVE_MIB");                     // the default (256 MiB) must not be used...
  env["FAKE_CUDA_CONTEXT_BYTES"] = std::to_string(300 * kMiB);  // ...when NVML reports 300 MiB
  Child first({kProbe, "allocs", std::to_string(100 * kMiB)}, env);
  REQUIRE(first.waitForOutput("ready=1"));
  Child second({kProbe, "allocs", std::to_string(100 * kMiB), std::to_string(250 * kMiB)}, env);
  REQUIRE(second.waitForOutput("ready=1"));
  // 2 contexts x 300 MiB + 100 + 100 MiB = 800 MiB; 250 more would pass 1 GiB.
  CHECK(box.regionLayout()->devices[0].used.load() == static_cast<std::uint64_t>(800 * kMiB));
  ProcessResult r1 = first.wait(), r2 = second.wait();
  INFO(describe(r1) << describe(r2));
  CHECK(r1.num("free_before") == kLimit - 300 * kMiB);  // a query charges the context first
  CHECK(r1.num("alloc0") == 0);
  CHECK(r1.num("free") == kLimit - 400 * kMiB);
  CHECK(r2.num("free_before") == kLimit - 700 * kMiB);
  CHECK(r2.num("alloc0") == 0);
  CHECK(r2.num("alloc1") == kOom);
  CHECK(r2.num("free") == kLimit - 800 * kMiB);
  // What the pod really holds on the device never passed the limit.
  CHECK(box.fake()->devices[0].highWater.load() <= static_cast<std::uint64_t>(kLimit));
}

TEST_CASE("context memory is charged per process: TESSERA_CONTEXT_RESERVE_MIB without NVML's figure",
          "[isolation][preload][context]") {
  Sandbox box;
  Env env = box.env();
  env["TESSERA_CONTEXT_RESERVE_MIB"] = "200";
  env["FAKE_CUDA_CONTEXT_BYTES"] = std::to_string(150 * kMiB);
  env.emplace("FAKE_NVML_HIDE_PROCESSES", "1");  // as in a container whose pids NVML does not show
  Child first({kProbe, "allocs", std::to_string(100 * kMiB)}, env);
  REQUIRE(first.waitForOutput("ready=1"));
  CHECK(box.regionLayout()->devices[0].used.load() == static_cast<std::uint64_t>(300 * kMiB));
  Child second({kProbe, "allocs", std::to_string(400 * kMiB), std::to_string(100 * kMiB)}, env);
  REQUIRE(second.waitForOutput("ready=1"));
  ProcessResult r1 = first.wait(), r2 = second.wait();
  INFO(describe(r1) << describe(r2));
  CHECK(r1.num("free_before") == kLimit - 200 * kMiB);
  CHECK(r1.num("free") == kLimit - 300 * kMiB);
  // 300 + 200 (context) + 400 + 100 = 1000 MiB: fits in 1 GiB.
  CHECK(r2.num("alloc0") == 0);
  CHECK(r2.num("alloc1") == 0);
  CHECK(r2.num("free") == kLimit - 1000 * kMiB);

  // A process whose context does not fit sees no free memory and gets nothing.
  Env tight = env;
  tight["GPU_MEMORY_LIMIT"] = std::to_string(150 * kMiB);
  tight["TESSERA_ISOLATION_REGION"] = box.dir.path("tight.region");
  ProcessResult r3 = run({kProbe, "allocs", "1"}, tight);
  INFO(describe(r3));
  CHECK(r3.num("free_before") == 0);
  CHECK(r3.num("alloc0") == kOom);
}

TEST_CASE("graph memory nodes are credited when their graph goes and charged again on launch",
          "[isolation][preload][graph]") {
  Sandbox box;
  ProcessResult r = run({kProbe, "graphs"}, box.env());
  INFO(describe(r));
  REQUIRE(r.exitCode == 0);
  CHECK(r.num("nodes_rc") == 0);
  CHECK(r.num("after_nodes") == 30 * kMiB);
  CHECK(r.num("destroy_node") == 0);
  CHECK(r.num("after_destroy_node") == 10 * kMiB);  // the destroyed node's 20 MiB are back
  CHECK(r.num("instantiate") == 0);
  CHECK(r.num("after_instantiate") == 10 * kMiB);
  CHECK(r.num("free_explicit") == 0);
  CHECK(r.num("after_free") == 0);
  CHECK(r.num("launch1") == 0);
  CHECK(r.num("after_launch1") == 10 * kMiB);  // the launch allocates again: charged again
  CHECK(r.num("launch2") == 0);
  CHECK(r.num("after_launch2") == 10 * kMiB);  // once
  CHECK(r.num("graph_destroy") == 0);
  CHECK(r.num("after_graph_destroy") == 10 * kMiB);
  CHECK(r.num("exec_destroy") == 0);
  CHECK(r.num("after_exec_destroy") == 0);
  CHECK(r.num("big_node") == 0);
  CHECK(r.num("other_alloc") == 0);
  CHECK(r.num("big_launch_refused") == kOom);
  CHECK(r.num("after_refused") == 500 * kMiB);
  CHECK(r.num("big_launch") == 0);
  CHECK(r.num("after_big_launch") == 600 * kMiB);
  CHECK(r.num("addnode") == 0);
  CHECK(r.num("after_addnode") == 30 * kMiB);
  CHECK(r.num("plain_destroy") == 0);
  CHECK(r.num("used_end") == 0);
  CHECK(box.calls(tessera::fake::Call::cuGraphLaunch) == 3);  // the refused launch never reached it
  CHECK(box.fake()->devices[0].used.load() == 0);
  CHECK(box.fake()->devices[0].highWater.load() <= static_cast<std::uint64_t>(kLimit));
}
