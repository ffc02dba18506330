// libFuzzer target: pod annotations and labels Tessera reads. The input's lines become the values
// of gpu-fraction, gpu-memory, gpu-fraction-num-devices, tessera.dev/node-policy, tessera.dev/queue,
// pod-group-name and tessera.dev/task-priority on two pods (one with all of them as annotations, one
// with queue and task priority as labels), which then go through a whole scheduling cycle on a tiny
// embedded cluster (cache, session with every action, binder, kubelet). Nothing may crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/clock.h"
#include "tessera/api/convert.h"
#include "tessera/api/objects.h"
#include "tessera/app/registry.h"
#include "tessera/binder/binder.h"
#include "tessera/cache/cache.h"
#include "tessera/cache/memory_cluster.h"
#include "tessera/framework/config.h"
#include "tessera/framework/scheduler.h"

namespace {

using Json = nlohmann::json;
using tessera::api::Kind;

const char* const kKeys[] = {tessera::api::keys::kGpuFraction, tessera::api::keys::kGpuMemory,
                             tessera::api::keys::kGpuFractionNumDevices, tessera::api::keys::kNodePolicy,
                             tessera::api::keys::kQueueLabel,  "pod-group-name",
                             tessera::api::keys::kTaskPriorityLabel};

Json manifest(const char* yaml) { return tessera::api::yamlToJson(yaml).value().front(); }

Json pod(const std::string& name, const std::vector<std::string>& values, bool asLabels) {
  Json p = manifest(R"(apiVersion: v1
kind: Pod
metadata: {name: x, namespace: default}
spec:
  schedulerName: tessera
  containers: [{name: c, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
)");
  p["metadata"]["name"] = name;
  Json& ann = p["metadata"]["annotations"];
  Json& lab = p["metadata"]["labels"];
  ann = Json::object();
  lab = Json::object();
  for (size_t i = 0; i < std::size(kKeys) && i < values.size(); ++i) {
    const std::string key = kKeys[i];
    const bool label = asLabels && (key == tessera::api::keys::kQueueLabel || key == tessera::api::keys::kTaskPriorityLabel);
    (label ? lab : ann)[key] = values[i];
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  // One value per line; a value may hold any other byte (JSON strings are UTF-8: invalid bytes
  // are replaced so the object can be stored at all).
  std::vector<std::string> values(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') values.emplace_back();
    else values.back().push_back(static_cast<char>(data[i]));
  }
  for (auto& v : values) {
    Json s = v;
    v = Json::parse(s.dump(-1, ' ', false, Json::error_handler_t::replace)).get<std::string>();
  }

  api::FakeClock clock(api::parseTime("2026-01-01T00:00:00Z").value());
  cache::MemoryCluster cluster(clock);
  auto create = [&](Kind kind, const Json& obj) { (void)cluster.create(kind, obj); };
  create(Kind::Node, manifest(R"(apiVersion: v1
kind: Node
metadata: {name: n1, labels: {nvidia.com/gpu.memory: "16384", nvidia.com/gpu.product: A100}}
status:
  allocatable: {cpu: "8", memory: 64Gi, pods: "110", nvidia.com/gpu: "2"}
  conditions: [{type: Ready, status: "True"}]
)"));
  create(Kind::Queue, manifest(R"(apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: team-a}
spec: {resources: {gpu: {quota: "2"}, cpu: {quota: "-1"}, memory: {quota: "-1"}}}
)"));
  create(Kind::PodGroup, manifest(R"(apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: pg, namespace: default}
spec: {minMember: 1, queue: team-a}
)"));
  create(Kind::Pod, pod("a", values, false));
  create(Kind::Pod, pod("b", values, true));

  auto config = framework::loadConfig(app::builtinRegistry(), nullptr);
  if (!config.ok()) __builtin_trap();
  cache::Cache cache(cluster, clock, cache::CacheOptions{config->schedulerName});
  if (!cache.start().ok()) return 0;
  binder::BinderOptions bo;
  bo.workers = 1;
  binder::Binder binder(cluster, cache, clock, bo);
  framework::Scheduler scheduler(cache, *config, clock, binder);
  for (int i = 0; i < 2; ++i) {
    (void)scheduler.runCycle();
    binder.waitIdle();
    (void)cluster.kubeletTick();
    clock.advance(api::Duration{1000});
  }
  return 0;
}
