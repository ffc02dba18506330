// The RBAC in deploy/rbac/ and deploy/monitor/, and the RBAC the Helm chart renders (deploy/helm/tessera with its
// default values and with test/deploy/helm/values-full.yaml, rendered by the ctest fixture
// deploy_helm_render into TESSERA_HELM_RENDERED_DIR), covers every API call Tessera makes and
// grants nothing it does not use. Dynamic: the real `tessera run` (a child process) runs against
// the test API server, which records every request as an RBAC authorizer names it (verb, API
// group, resource, subresource, namespace, name); the cluster makes it list and watch everything,
// bind, preempt (DisruptionTarget, DELETE), report unschedulable pods and gangs (status patch,
// Events) and hold and release the leader Lease; then the real `tessera monitor`, where installed,
// runs against it too and lists its node's pods. Static: the calls of code paths this run does
// not reach (GPU sharing in the binder, status writes, `tessera reserve`), each with the reason.
// Every call must be allowed by a rule bound to its ServiceAccount (ClusterRoles anywhere, Roles
// in their namespace); every (group, resource, verb) granted must be used by one of them. Nothing
// asserts on wall-clock time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <sys/wait.h>
#include <unistd.h>

#include "support/daemon_process.h"
#include "tessera/api/convert.h"
#include "tessera/app/run.h"
#include "tessera/cache/http_server.h"

using namespace tessera;
using cache::ApiRequestRecord;
using cache::Json;
namespace fs = std::filesystem;

namespace {

const std::string kSystemNs = "tessera-system";
const std::string kReservationNs = "tessera-reservation";

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path tempDir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("tessera-rbac-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

/// One API call: what RBAC authorizes, plus who makes it and why (for messages).
struct Call {
  std::string serviceAccount;  ///< "namespace/name"
  ApiRequestRecord req;
  std::string why;
};

std::string describe(const ApiRequestRecord& r) {
  std::string s = r.verb + " " + (r.apiGroup.empty() ? "core" : r.apiGroup) + "/" + r.resource;
  if (!r.subresource.empty()) s += "/" + r.subresource;
  s += r.namespace_.empty() ? " (cluster-wide)" : " in namespace " + r.namespace_;
  if (!r.name.empty()) s += " named " + r.name;
  return s;
}

// ---- RBAC as the API server evaluates it ----

struct Rule {
  std::set<std::string> groups, resources, verbs, names;
};
struct Role {
  std::string kind, name, namespace_;  ///< namespace_ empty for ClusterRoles
  std::vector<Rule> rules;
};
struct Binding {
  std::string kind, namespace_, roleKind, roleName;
  std::set<std::string> serviceAccounts;  ///< "namespace/name"
};

std::set<std::string> strings(const Json& j, const char* key) {
  std::set<std::string> out;
  if (j.contains(key) && j[key].is_array())
    for (const auto& v : j[key]) out.insert(v.get<std::string>());
  return out;
}

struct Rbac {
  std::vector<Role> roles;
  std::vector<Binding> bindings;

  /// The Roles, ClusterRoles and bindings among docs (other kinds are skipped).
  void add(const std::vector<Json>& docs) {
    for (const auto& d : docs) {
      const std::string kind = d.value("kind", "");
      const Json& meta = d["metadata"];
      if (kind == "Role" || kind == "ClusterRole") {
        Role r{kind, meta.value("name", ""), kind == "Role" ? meta.value("namespace", "") : "", {}};
        for (const auto& j : d["rules"])
          r.rules.push_back(
              {strings(j, "apiGroups"), strings(j, "resources"), strings(j, "verbs"), strings(j, "resourceNames")});
        roles.push_back(std::move(r));
      } else if (kind == "RoleBinding" || kind == "ClusterRoleBinding") {
        Binding b{kind,
                  kind == "RoleBinding" ? meta.value("namespace", "") : "",
                  d["roleRef"].value("kind", ""),
                  d["roleRef"].value("name", ""),
                  {}};
        for (const auto& s : d["subjects"])
          if (s.value("kind", "") == "ServiceAccount")
            b.serviceAccounts.insert(s.value("namespace", "") + "/" + s.value("name", ""));
        bindings.push_back(std::move(b));
      }
    }
  }

  const Role* role(const std::string& kind, const std::string& name, const std::string& ns) const {
    for (const auto& r : roles)
      if (r.kind == kind && r.name == name && (kind == "ClusterRole" || r.namespace_ == ns)) return &r;
    return nullptr;
  }

  /// The rules that apply to `sa` for a request in namespace `ns` (empty: cluster-wide).
  std::vector<const Rule*> rulesFor(const std::string& sa, const std::string& ns) const {
    std::vector<const Rule*> out;
    for (const auto& b : bindings) {
      if (!b.serviceAccounts.count(sa)) continue;
      if (b.kind == "RoleBinding" && (ns.empty() || b.namespace_ != ns)) continue;
      const Role* r = role(b.roleKind, b.roleName, b.namespace_);
      if (!r) continue;
      for (const auto& rule : r->rules) out.push_back(&rule);
    }
    return out;
  }

  static bool matches(const Rule& rule, const ApiRequestRecord& req) {
    const std::string res = req.subresource.empty() ? req.resource : req.resource + "/" + req.subresource;
    if (!rule.groups.count(req.apiGroup) || !rule.resources.count(res) || !rule.verbs.count(req.verb)) return false;
    // resourceNames never match list, watch or create (the name is not known to the authorizer).
    if (!rule.names.empty()) return !req.name.empty() && rule.names.count(req.name);
    return true;
  }

  bool allows(const std::string& sa, const ApiRequestRecord& req) const {
    for (const Rule* r : rulesFor(sa, req.namespace_))
      if (matches(*r, req)) return true;
    return false;
  }
};

// ---- the daemon against the recording test API server ----

/// The daemon as deploy/scheduler/deployment.yaml runs it: its Lease in tessera-system.
struct DaemonProcess : testing::DaemonProcess {
  DaemonProcess(const std::string& url, const std::string& leaseName)
      : testing::DaemonProcess(TESSERA_BINARY, tempDir(), url, "rbac-test", {"--lease-name", leaseName}, kSystemNs) {}
};
using testing::eventually;

// A preemption, a bind, an unschedulable pod and an incomplete gang, with every kind the cache
// watches present (Topology included).
const char* const kCluster = R"(
name: rbac-coverage
objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}
  - {apiVersion: v1, kind: Namespace, metadata: {name: tessera-system}}
  - {apiVersion: v1, kind: Namespace, metadata: {name: tessera-reservation}}
  - apiVersion: v1
    kind: Node
    metadata:
      name: shared-1
      labels: {kubernetes.io/hostname: shared-1, nvidia.com/gpu.memory: "81920", nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
    status:
      allocatable: {cpu: "8", memory: 64Gi, pods: "110", nvidia.com/gpu: "1"}
      conditions: [{type: Ready, status: "True"}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: frac, namespace: team-a, annotations: {gpu-fraction: "0.5"}}
    spec:
      schedulerName: tessera
      containers:
        - {name: c, image: x, resources: {requests: {cpu: "1"}}}
  - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: 50}
  - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 75}
  - apiVersion: scheduling.tessera.dev/v1alpha1
    kind: Queue
    metadata: {name: default}
    spec:
      resources:
        gpu: {quota: "-1", limit: "-1", overQuotaWeight: "1"}
        cpu: {quota: "-1", limit: "-1", overQuotaWeight: "1"}
        memory: {quota: "-1", limit: "-1", overQuotaWeight: "1"}
  - apiVersion: scheduling.tessera.dev/v1alpha1
    kind: Topology
    metadata: {name: cluster}
    spec: {levels: [{nodeLabel: kubernetes.io/hostname}]}
  - apiVersion: scheduling.tessera.dev/v1alpha1
    kind: PodGroup
    metadata: {name: gang, namespace: team-a}
    spec: {minMember: 3}
  - apiVersion: v1
    kind: Node
    metadata: {name: gpu-1, labels: {kubernetes.io/hostname: gpu-1}}
    status:
      allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "4"}
      conditions: [{type: Ready, status: "True"}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: victim, namespace: team-a, creationTimestamp: "2025-12-31T00:00:00Z"}
    spec:
      schedulerName: tessera
      nodeName: gpu-1
      priorityClassName: low
      priority: 50
      containers:
        - {name: c, image: x, resources: {requests: {nvidia.com/gpu: "4"}, limits: {nvidia.com/gpu: "4"}}}
    status: {phase: Running, startTime: "2025-12-31T00:00:00Z"}
  - apiVersion: v1
    kind: Pod
    metadata: {name: preemptor, namespace: team-a}
    spec:
      schedulerName: tessera
      priorityClassName: high
      priority: 75
      containers:
        - {name: c, image: x, resources: {requests: {nvidia.com/gpu: "4"}, limits: {nvidia.com/gpu: "4"}}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: too-big, namespace: team-a}
    spec:
      schedulerName: tessera
      containers:
        - {name: c, image: x, resources: {requests: {nvidia.com/gpu: "64"}, limits: {nvidia.com/gpu: "64"}}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: gang-0, namespace: team-a, annotations: {pod-group-name: gang}}
    spec:
      schedulerName: tessera
      containers:
        - {name: c, image: x, resources: {requests: {cpu: "1"}}}
)";

bool podScheduledFalse(cache::MemoryCluster& cluster, const std::string& ns, const std::string& name) {
  auto p = cluster.get(api::Kind::Pod, ns, name);
  if (!p.ok() || !p->contains("status") || !(*p)["status"].contains("conditions")) return false;
  for (const auto& c : (*p)["status"]["conditions"])
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") return true;
  return false;
}

/// kCluster, loaded into `cluster` through a scenario file named `file` under tempDir().
void loadCluster(cache::MemoryCluster& cluster, const api::Clock& clock, const std::string& file) {
  const fs::path scenario = tempDir() / file;
  std::ofstream(scenario) << kCluster;
  REQUIRE(app::loadScenarioObjects(scenario.string(), cluster, clock.now()).ok());
}

/// What a working daemon has done with kCluster: the preemptor and the fraction bound, the pod too
/// big for any node marked PodScheduled=False (and the incomplete gang's pod, when `gangToo`).
bool scheduledAll(cache::MemoryCluster& cluster, bool gangToo) {
  auto bound = [&](const char* name) {
    auto p = cluster.get(api::Kind::Pod, "team-a", name);
    return p.ok() && !(*p)["spec"].value("nodeName", "").empty();
  };
  return bound("preemptor") && bound("frac") && podScheduledFalse(cluster, "team-a", "too-big") &&
         (!gangToo || podScheduledFalse(cluster, "team-a", "gang-0"));
}

std::string argValue(const Json& args, const std::string& flag) {
  for (const auto& a : args) {
    const std::string s = a.get<std::string>();
    if (s.rfind(flag + "=", 0) == 0) return s.substr(flag.size() + 1);
  }
  return "";
}

std::vector<Json> loadYaml(const fs::path& p) {
  INFO(p);
  REQUIRE(fs::exists(p));
  auto docs = api::yamlToJson(readFile(p));
  REQUIRE(docs.ok());
  return *docs;
}

/// What one way of installing Tessera grants, and how it runs the scheduler.
struct Install {
  std::string source;  ///< for messages: "deploy/rbac", "helm-default.yaml", ...
  Rbac rbac;
  std::string schedulerSa;  ///< "namespace/name" of the scheduler Deployment's ServiceAccount
  std::string leaseName;    ///< its --lease-name
  std::string monitorSa;    ///< "namespace/name" of the DaemonSet tessera-monitor's; empty: not installed
};

/// docs: the objects installed, the Deployment tessera-scheduler among them.
Install installOf(const std::string& source, const std::vector<Json>& docs) {
  Install in{source, {}, "", "", ""};
  in.rbac.add(docs);
  const Json* dep = nullptr;
  for (const auto& d : docs) {
    const std::string kind = d.value("kind", ""), name = d["metadata"].value("name", "");
    if (kind == "Deployment" && name == "tessera-scheduler") dep = &d;
    if (kind == "DaemonSet" && name == "tessera-monitor")
      in.monitorSa =
          d["metadata"].value("namespace", "") + "/" + d["spec"]["template"]["spec"].value("serviceAccountName", "");
  }
  INFO(source);
  REQUIRE(dep);
  const Json& podSpec = (*dep)["spec"]["template"]["spec"];
  in.schedulerSa = (*dep)["metadata"].value("namespace", "") + "/" + podSpec.value("serviceAccountName", "");
  const Json& args = podSpec["containers"][0]["args"];
  REQUIRE(argValue(args, "--lease-namespace") == kSystemNs);
  in.leaseName = argValue(args, "--lease-name");
  REQUIRE(!in.leaseName.empty());
  return in;
}

/// Every call Tessera makes when installed as `in` says: recorded from a run of the daemon, plus
/// the calls of code paths the run does not reach.
std::vector<Call> callsOf(const Install& in) {
  const std::string& schedulerSa = in.schedulerSa;
  const std::string& leaseName = in.leaseName;
  const std::string reservationSa = kReservationNs + "/tessera-reservation";

  // ---- dynamic: run the daemon and record what it asks for ----
  std::mutex mu;
  std::vector<ApiRequestRecord> recorded;
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  loadCluster(cluster, clock, "cluster.yaml");
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;
  so.onRequest = [&](const ApiRequestRecord& r) {
    std::lock_guard lock(mu);
    recorded.push_back(r);
  };
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());
  {
    DaemonProcess daemon(server.url(), leaseName);
    const bool done = eventually([&] { return scheduledAll(cluster, /*gangToo=*/true); });
    INFO(daemon.log());
    REQUIRE(done);
    CHECK(daemon.kill(SIGTERM) == 0);  // gives the Lease up: one more update
  }
  // tessera monitor on the node gpu-1, as its DaemonSet runs it (there: --in-cluster), until its
  // first sweep has listed the node's pods. The daemon has exited: what comes now is the monitor's.
  size_t monitorFrom = 0;
  {
    std::lock_guard lock(mu);
    monitorFrom = recorded.size();
  }
  if (!in.monitorSa.empty()) {
    const fs::path regions = tempDir() / "regions";
    fs::create_directories(regions);
    testing::ChildProcess monitor(
        {TESSERA_BINARY, "monitor", "--kubeconfig", testing::writeKubeconfig(tempDir(), "monitor", server.url()),
         "--node-name", "gpu-1", "--region-dir", regions.string(), "--address", "127.0.0.1", "--port", "0"},
        (tempDir() / "monitor.log").string());
    const bool listed = eventually([&] {
      std::lock_guard lock(mu);
      for (size_t i = monitorFrom; i < recorded.size(); ++i)
        if (recorded[i].verb == "list" && recorded[i].resource == "pods") return true;
      return false;
    });
    INFO(monitor.log());
    REQUIRE(listed);
    CHECK(monitor.kill(SIGTERM) == 0);
  }
  server.stop();

  std::vector<Call> calls;
  {
    std::lock_guard lock(mu);
    for (size_t i = 0; i < recorded.size(); ++i)
      calls.push_back(i < monitorFrom ? Call{schedulerSa, recorded[i], "recorded from tessera run"}
                                      : Call{in.monitorSa, recorded[i], "recorded from tessera monitor"});
  }
  // What the run must have shown, so a broken run cannot pass by making no calls.
  auto seenFrom = [&](const std::string& sa, const std::string& verb, const std::string& resource,
                      const std::string& sub = "") {
    for (const auto& c : calls)
      if (c.serviceAccount == sa && c.req.verb == verb && c.req.resource == resource && c.req.subresource == sub)
        return true;
    return false;
  };
  auto seen = [&](const std::string& verb, const std::string& resource, const std::string& sub = "") {
    return seenFrom(schedulerSa, verb, resource, sub);
  };
  if (!in.monitorSa.empty()) CHECK(seenFrom(in.monitorSa, "list", "pods"));
  for (const char* res : {"pods", "nodes", "podgroups", "queues", "topologies", "priorityclasses"}) {
    INFO(res);
    CHECK(seen("list", res));
    CHECK(seen("watch", res));
  }
  for (const char* group : {"scheduling.volcano.sh", "scheduling.x-k8s.io"}) {  // other schedulers' PodGroups
    INFO(group);
    CHECK(std::any_of(calls.begin(), calls.end(), [&](const Call& c) {
      return c.serviceAccount == schedulerSa && c.req.verb == "watch" && c.req.apiGroup == group &&
             c.req.resource == "podgroups";
    }));
  }
  CHECK(seen("create", "pods", "binding"));
  CHECK(seen("patch", "pods", "status"));
  CHECK(seen("delete", "pods"));
  CHECK(seen("create", "events"));
  CHECK(seen("create", "leases"));
  CHECK(seen("update", "leases"));
  CHECK(seen("create", "pods"));        // the GPU reservation pod
  CHECK(seen("create", "configmaps"));  // the fractional pod's GPU ConfigMap
  CHECK(seen("patch", "pods"));         // its GPU group label

  // ---- static: code paths the run above does not reach ----
  auto add = [&](const std::string& sa, ApiRequestRecord r, const std::string& why) {
    calls.push_back({sa, std::move(r), why});
  };
  add(schedulerSa, {"get", "", "pods", "", "team-a", "p"}, "binder: re-reads a pod after a 409 on bind");
  add(schedulerSa, {"delete", "", "pods", "", kReservationNs, "r"}, "binder: reservation pod garbage collection");
  for (const char* verb : {"get", "update"})
    add(schedulerSa, {verb, "", "configmaps", "", "team-a", "p-tessera-gpu"},
        "binder: rewrites a GPU ConfigMap left by an earlier attempt (a restart between reservation and bind)");
  for (const char* verb : {"patch", "update"}) {
    add(schedulerSa, {verb, "scheduling.tessera.dev", "podgroups", "status", "team-a", "pg"}, "PodGroup status writer");
    add(schedulerSa, {verb, "scheduling.tessera.dev", "queues", "status", "", "q"}, "Queue status writer");
  }
  add(schedulerSa, {"patch", "scheduling.tessera.dev", "podgroups", "", "team-a", "pg"},
      "stalegangeviction: the tessera.dev/stale-since annotation (status writer)");
  for (const char* verb : {"get", "create", "update"})
    add(schedulerSa, {verb, "", "configmaps", "", kSystemNs, "tessera-usage"},
        "time-aware usage history: restored at start, saved every saveInterval (status writer)");
  add(schedulerSa, {"get", "coordination.k8s.io", "leases", "", kSystemNs, leaseName}, "leader election: read");
  add(schedulerSa, {"patch", "", "events", "", "team-a", "p.1"},
      "status writer: a repeated event bumps the count of the Event written (at most every 5 minutes)");
  // The pod grouper: the run's pods are bare, so it reads namespaces only (recorded above).
  add(schedulerSa, {"get", "", "namespaces", "", "", "team-a"}, "pod grouper: the namespace's queue label");
  for (const char* verb : {"get", "create"})
    add(schedulerSa, {verb, "scheduling.tessera.dev", "podgroups", "", "team-a", "pg-pytorchjob-j"},
        "pod grouper: the workload's PodGroup");
  for (const auto& [group, resource] : std::vector<std::pair<std::string, std::string>>{
           {"batch", "jobs"}, {"jobset.x-k8s.io", "jobsets"}, {"kubeflow.org", "pytorchjobs"},
           {"kubeflow.org", "tfjobs"}, {"kubeflow.org", "mpijobs"}, {"kubeflow.org", "xgboostjobs"},
           {"kubeflow.org", "paddlejobs"}, {"kubeflow.org", "jaxjobs"}, {"trainer.kubeflow.org", "trainjobs"},
           {"ray.io", "rayclusters"}, {"ray.io", "rayjobs"}, {"ray.io", "rayservices"},
           {"leaderworkerset.x-k8s.io", "leaderworkersets"}})
    add(schedulerSa, {"get", group, resource, "", "team-a", "w"}, "pod grouper: a pod's owner workload");
  // Scheduling shards (docs/sharding.md): `tessera run --shard NAME`.
  add(schedulerSa, {"get", "scheduling.tessera.dev", "schedulingshards", "", "", "pool-a"},
      "--shard: the SchedulingShard's pool and config at start");
  add(schedulerSa, {"list", "scheduling.tessera.dev", "schedulingshards", "", "", ""},
      "--shard: no other SchedulingShard may claim the same pool");
  add(schedulerSa, {"patch", "scheduling.tessera.dev", "schedulingshards", "status", "", "pool-a"},
      "--shard: the leader writes the shard's status");
  add(schedulerSa, {"patch", "", "pods", "", "team-a", "p"},
      "the default shard labels a pod whose PodGroup belongs to another node pool");
  add(reservationSa, {"patch", "", "pods", "", kReservationNs, "gpu-reservation-g"},
      "tessera reserve: writes tessera.dev/gpu-uuid on its own pod");

  return calls;
}

/// Every call allowed by in.rbac, and every (group, resource, verb) it grants used by a call.
void checkCoverage(const Install& in, const std::vector<Call>& calls) {
  const Rbac& rbac = in.rbac;
  INFO("RBAC of " << in.source);
  // ---- every call allowed ----
  std::set<std::string> denied;
  for (const auto& c : calls)
    if (!rbac.allows(c.serviceAccount, c.req))
      denied.insert(c.serviceAccount + ": " + describe(c.req) + " (" + c.why + ")");
  for (const auto& d : denied) FAIL_CHECK("not allowed by the RBAC of " << in.source << ": " << d);

  // ---- every grant used (the Roles and ClusterRoles of Tessera's own components) ----
  for (const auto& role : rbac.roles) {
    std::set<std::string> sas;
    for (const auto& b : rbac.bindings)
      if (b.roleKind == role.kind && b.roleName == role.name &&
          (role.kind == "ClusterRole" || b.namespace_ == role.namespace_))
        sas.insert(b.serviceAccounts.begin(), b.serviceAccounts.end());
    for (const auto& rule : role.rules)
      for (const auto& g : rule.groups)
        for (const auto& res : rule.resources)
          for (const auto& verb : rule.verbs) {
            bool used = false;
            for (const auto& c : calls) {
              const std::string r =
                  c.req.subresource.empty() ? c.req.resource : c.req.resource + "/" + c.req.subresource;
              if (sas.count(c.serviceAccount) && c.req.apiGroup == g && r == res && c.req.verb == verb &&
                  (role.kind == "ClusterRole" || c.req.namespace_ == role.namespace_))
                used = true;
            }
            INFO(role.kind << " " << role.name << " grants " << verb << " " << (g.empty() ? "core" : g) << "/" << res);
            CHECK(used);
          }
  }
}

}  // namespace

TEST_CASE("deploy: the RBAC in deploy/rbac covers every API call and grants nothing unused") {
  const fs::path deploy = fs::path(TESSERA_SOURCE_DIR) / "deploy";
  std::vector<Json> docs = loadYaml(deploy / "scheduler" / "deployment.yaml");
  for (const char* folder : {"rbac", "monitor"})
    for (const auto& entry : fs::directory_iterator(deploy / folder)) {
      if (entry.path().extension() != ".yaml" || entry.path().filename() == "kustomization.yaml") continue;
      for (auto& d : loadYaml(entry.path())) docs.push_back(std::move(d));
    }
  const Install in = installOf("deploy/rbac and deploy/monitor", docs);
  REQUIRE(!in.monitorSa.empty());
  checkCoverage(in, callsOf(in));
}

TEST_CASE("deploy: the RBAC the Helm chart renders covers every API call and grants nothing unused") {
  // Written by the ctest fixture deploy_helm_render (test/deploy/check_helm.py render).
  for (const char* file : {"helm-default.yaml", "helm-full.yaml"}) {
    const Install in = installOf(file, loadYaml(fs::path(TESSERA_HELM_RENDERED_DIR) / file));
    checkCoverage(in, callsOf(in));
  }
}

namespace {

/// tessera run against a test API server that enforces `in`'s RBAC for the scheduler's service
/// account: true when it preempts and binds, marks the pods it cannot place and keeps its Lease.
bool enforcedRunSchedules(const Install& in, std::string& log) {
  api::SystemClock clock;
  cache::MemoryCluster cluster(clock);
  loadCluster(cluster, clock, "cluster-enforced.yaml");
  cache::ApiServerOptions so;
  so.kubeletPeriodMs = 50;
  so.authorize = [&](const ApiRequestRecord& r) { return in.rbac.allows(in.schedulerSa, r); };
  cache::ApiServer server(cluster, so);
  REQUIRE(server.start().ok());
  DaemonProcess daemon(server.url(), in.leaseName);
  const bool done = eventually([&] { return scheduledAll(cluster, /*gangToo=*/false); }, /*seconds=*/20);
  log = daemon.log();
  return done;
}

}  // namespace

TEST_CASE("deploy: tessera run with the RBAC of deploy/rbac enforced schedules; with one verb removed it cannot") {
  const fs::path deploy = fs::path(TESSERA_SOURCE_DIR) / "deploy";
  std::vector<Json> docs = loadYaml(deploy / "scheduler" / "deployment.yaml");
  for (const auto& entry : fs::directory_iterator(deploy / "rbac"))
    if (entry.path().extension() == ".yaml" && entry.path().filename() != "kustomization.yaml")
      for (auto& d : loadYaml(entry.path())) docs.push_back(std::move(d));
  Install in = installOf("deploy/rbac", docs);
  std::string log;
  {
    INFO("the shipped RBAC");
    const bool ok = enforcedRunSchedules(in, log);
    INFO(log);
    CHECK(ok);
    CHECK(log.find("forbidden") == std::string::npos);
  }
  // The same without `create pods/binding`: nothing is bound, and the log says why.
  size_t removed = 0;
  for (auto& role : in.rbac.roles)
    for (auto& rule : role.rules)
      if (rule.resources.count("pods/binding")) removed += rule.verbs.erase("create");
  REQUIRE(removed == 1);
  {
    INFO("without create pods/binding");
    const bool ok = enforcedRunSchedules(in, log);
    INFO(log);
    CHECK_FALSE(ok);
    CHECK(log.find("forbidden") != std::string::npos);
  }
}
