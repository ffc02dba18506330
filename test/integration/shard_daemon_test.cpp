// Scheduling shards (issue 21, docs/sharding.md): `tessera run --shard NAME` processes against one
// test API server with two node pools and the default shard. Each binds only its pool's pods onto
// its pool's nodes; killing one shard leaves the other scheduling; a second replica of the killed
// shard takes its Lease over and schedules its pool again; the default shard labels a pod whose
// PodGroup belongs to a pool, so that pool's shard places it.
// Waits poll the cluster with generous deadlines as a safety net only; nothing asserts on speed.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <memory>
#include <string>

#include "support/daemon_process.h"
#include "tessera/api/convert.h"
#include "tessera/cache/http_server.h"

using namespace tessera;  // NOLINT(google-build-using-namespace)
using cache::Json;
using testing::eventually;
namespace fs = std::filesystem;

namespace {

fs::path dir() {
  static fs::path d = testing::scratchDir("tessera-shard-it");
  return d;
}

/// One replica of shard `shard` (leader election on: Lease default/tessera-<shard>).
struct Shard : testing::DaemonProcess {
  Shard(const std::string& url, const std::string& identity, const std::string& shard)
      : testing::DaemonProcess(TESSERA_BINARY, dir(), url, identity,
                               {"--shard", shard, "--usage-configmap", "", "--lease-namespace", "default"}) {}
};

void create(cache::MemoryCluster& cluster, const std::string& yaml) { testing::createObjects(cluster, yaml); }

std::string shardYaml(const std::string& name, const std::string& pool) {
  return "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: SchedulingShard\nmetadata: {name: " + name + "}\n" +
         (pool.empty() ? "" : "spec: {nodePool: " + pool + "}\n") + "---\n";
}

std::string nodeYaml(const std::string& name, const std::string& pool, int gpus) {
  return "apiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\n" +
         (pool.empty() ? "" : "  labels: {tessera.dev/node-pool: " + pool + "}\n") +
         "status:\n  allocatable: {cpu: \"64\", memory: 512Gi, pods: \"110\", nvidia.com/gpu: \"" +
         std::to_string(gpus) + "\"}\n  conditions: [{type: Ready, status: \"True\"}]\n---\n";
}

/// A 1-GPU pod of pool `pool` ("" : no label); `group`: the PodGroup it names.
std::string podYaml(const std::string& name, const std::string& pool, const std::string& group = "") {
  std::string y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: default\n";
  if (!pool.empty()) y += "  labels: {tessera.dev/node-pool: " + pool + "}\n";
  if (!group.empty()) y += "  annotations: {pod-group-name: " + group + "}\n";
  return y + "spec:\n  schedulerName: tessera\n"
             "  containers: [{name: c, image: x, resources: {requests: {cpu: \"1\", nvidia.com/gpu: \"1\"}, "
             "limits: {nvidia.com/gpu: \"1\"}}}]\n---\n";
}

const std::string kQueue =
    "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: Queue\nmetadata: {name: default}\nspec:\n  resources:\n"
    "    gpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
    "    cpu: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n"
    "    memory: {quota: \"-1\", limit: \"-1\", overQuotaWeight: \"1\"}\n---\n";

std::string nodeOf(cache::MemoryCluster& cluster, const std::string& name) {
  auto p = cluster.get(api::Kind::Pod, "default", name);
  return p.ok() ? (*p)["spec"].value("nodeName", "") : "";
}

std::string holder(cache::MemoryCluster& cluster, const std::string& lease) {
  auto l = cluster.get(api::Kind::Lease, "default", lease);
  return l.ok() ? (*l).value("spec", Json::object()).value("holderIdentity", "") : "";
}

Json shardStatus(cache::MemoryCluster& cluster, const std::string& name) {
  auto s = cluster.get(api::Kind::SchedulingShard, "", name);
  return s.ok() ? (*s).value("status", Json::object()) : Json::object();
}

}  // namespace

TEST_CASE("shards: each binds its pool only; one killed, the other goes on; its replica takes the Lease over") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  create(cluster, shardYaml("pool-a", "a") + shardYaml("pool-b", "b") + shardYaml("default", "") + kQueue +
                      nodeYaml("a-1", "a", 4) + nodeYaml("b-1", "b", 2) + nodeYaml("d-1", "", 2) +
                      podYaml("a-0", "a") + podYaml("b-0", "b"));
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());

  auto a1 = std::make_unique<Shard>(server.url(), "a1", "pool-a");
  Shard b1(server.url(), "b1", "pool-b");
  {
    const bool placed = eventually([&] { return !nodeOf(cluster, "a-0").empty() && !nodeOf(cluster, "b-0").empty(); });
    INFO(a1->log() << b1.log());
    REQUIRE(placed);
  }
  CHECK(nodeOf(cluster, "a-0") == "a-1");
  CHECK(nodeOf(cluster, "b-0") == "b-1");
  CHECK(eventually([&] { return holder(cluster, "tessera-pool-a") == "a1" && holder(cluster, "tessera-pool-b") == "b1"; }));
  // Each leader writes its shard's status: its pool's nodes and who leads.
  CHECK(eventually([&] {
    const Json s = shardStatus(cluster, "pool-a");
    return s.value("nodes", -1) == 1 && s.value("leader", "") == "a1" && s.value("pendingPods", -1) == 0;
  }));
  CHECK(eventually([&] { return shardStatus(cluster, "pool-b").value("leader", "") == "b1"; }));

  // Shard pool-a dies: pool b's new pod is still placed; pool a's waits (b-1 and d-1 have room).
  a1->kill(SIGKILL);
  a1.reset();
  create(cluster, podYaml("a-2", "a") + podYaml("b-2", "b"));
  {
    const bool placed = eventually([&] { return !nodeOf(cluster, "b-2").empty(); });
    INFO(b1.log());
    REQUIRE(placed);
  }
  CHECK(nodeOf(cluster, "b-2") == "b-1");
  CHECK(nodeOf(cluster, "a-2").empty());

  // A second replica of pool-a takes the Lease over once the dead holder's has expired, and binds.
  Shard a2(server.url(), "a2", "pool-a");
  {
    const bool placed = eventually([&] { return !nodeOf(cluster, "a-2").empty(); });
    INFO(a2.log());
    REQUIRE(placed);
  }
  CHECK(nodeOf(cluster, "a-2") == "a-1");
  CHECK(holder(cluster, "tessera-pool-a") == "a2");

  // The default shard schedules only unlabelled nodes and pods; a pod without the label whose
  // PodGroup is of pool a is labelled by it, and then placed by pool-a's shard on pool a's node.
  Shard d1(server.url(), "d1", "default");
  create(cluster,
         "apiVersion: scheduling.tessera.dev/v1alpha1\nkind: PodGroup\nmetadata:\n  name: routed\n  namespace: default\n"
         "  labels: {tessera.dev/node-pool: a}\nspec: {minMember: 1, queue: default}\n---\n" +
             podYaml("r-0", "", "routed") + podYaml("d-0", ""));
  {
    const bool placed = eventually([&] { return !nodeOf(cluster, "r-0").empty() && !nodeOf(cluster, "d-0").empty(); });
    INFO(d1.log() << a2.log());
    REQUIRE(placed);
  }
  CHECK(nodeOf(cluster, "r-0") == "a-1");
  CHECK(nodeOf(cluster, "d-0") == "d-1");
  auto routed = cluster.get(api::Kind::Pod, "default", "r-0");
  REQUIRE(routed.ok());
  CHECK((*routed)["metadata"]["labels"].value("tessera.dev/node-pool", "") == "a");
  CHECK(d1.log().find("r-0") != std::string::npos);

  // No shard ever put a pod on another pool's node.
  for (const char* p : {"a-0", "a-2", "r-0"}) CHECK(nodeOf(cluster, p) == "a-1");
  for (const char* p : {"b-0", "b-2"}) CHECK(nodeOf(cluster, p) == "b-1");
  CHECK(b1.kill(SIGTERM) == 0);
  CHECK(a2.kill(SIGTERM) == 0);
  CHECK(d1.kill(SIGTERM) == 0);
  server.stop();
}

TEST_CASE("shards: a missing SchedulingShard, two shards of one pool, or shards for an unsharded daemon refuse the start") {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  create(cluster, shardYaml("gpu", "a") + shardYaml("gpu-too", "a"));
  cache::ApiServer server(cluster);
  REQUIRE(server.start().ok());
  {
    Shard missing(server.url(), "m1", "nope");
    const int status = missing.wait();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(missing.log().find("SchedulingShard nope not found") != std::string::npos);
  }
  {
    Shard twice(server.url(), "t1", "gpu");
    const int status = twice.wait();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(twice.log().find("SchedulingShard gpu and SchedulingShard gpu-too both schedule node pool a") !=
          std::string::npos);
  }
  {
    // An unsharded scheduler beside shards would place pods on their nodes too.
    testing::DaemonProcess unsharded(TESSERA_BINARY, dir(), server.url(), "u1", {"--usage-configmap", ""});
    const int status = unsharded.wait();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(unsharded.log().find("SchedulingShards exist (gpu, gpu-too)") != std::string::npos);
  }
  server.stop();
}
