// Pods still listed on a node that is gone (the Node object was deleted; the pods are not yet):
// the cache keeps them as jobs' running tasks but the snapshot has no such node. Every action must
// get through a cycle without touching them as if they were on a session node. Each cycle runs in a
// child process, so an assertion failure (abort) is reported here instead of killing the test run.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/framework/config.h"
#include "tessera/framework/session.h"
#include "support/test_cluster.h"
#include "support/test_registry.h"

namespace {

using tessera::framework::Session;
using tessera::testing::TestCluster;

/// Runs `fn` in a child process: "" when it returned, else how the child died.
std::string survives(const std::function<void()>& fn) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (int sig : {SIGABRT, SIGSEGV, SIGFPE, SIGILL, SIGBUS}) std::signal(sig, SIG_DFL);  // not Catch's
    fn();
    std::fflush(nullptr);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFSIGNALED(status)) return "the cycle died of signal " + std::to_string(WTERMSIG(status));
  return "the cycle exited with " + std::to_string(WEXITSTATUS(status));
}

std::string pod(const std::string& name, int gpus, const std::string& node, const std::string& more = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: t" + more +
         "}\nspec:\n  schedulerName: tessera\n" + (node.empty() ? "" : "  nodeName: " + node + "\n") +
         "  priorityClassName: low\n"
         "  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: \"" +
         std::to_string(gpus) + "\"}}}]\n" +
         (node.empty() ? "" : "status: {phase: Running, startTime: \"2025-12-31T00:00:00Z\"}\n") + "---\n";
}

/// n2 is deleted after its pods were listed: a gang below minMember (g-0 on n2, g-1 pending and
/// too big to fit) and a low-priority pod on n2; on n1 a low-priority pod and, pending, a
/// high-priority one that can only run by preempting it.
void cluster(TestCluster& c) {
  c.create(R"(
apiVersion: scheduling.tessera.dev/v1alpha1
kind: Queue
metadata: {name: default}
spec:
  resources:
    gpu: {quota: "-1", limit: "-1", overQuotaWeight: "1"}
    cpu: {quota: "-1", limit: "-1", overQuotaWeight: "1"}
    memory: {quota: "-1", limit: "-1", overQuotaWeight: "1"}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.tessera.dev/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: t}
spec: {minMember: 2}
)");
  c.create(tessera::testing::nodeYaml("n1", "32", "4"));
  c.create(tessera::testing::nodeYaml("n2", "32", "4"));
  c.create(pod("g-0", 1, "n2", ", annotations: {pod-group-name: g}") +
           pod("g-1", 8, "", ", annotations: {pod-group-name: g}") + pod("low-n2", 2, "n2") + pod("low-n1", 4, "n1"));
  c.create(R"(
apiVersion: v1
kind: Pod
metadata: {name: high, namespace: t}
spec:
  schedulerName: tessera
  priorityClassName: high
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "4"}}}]
)");
  REQUIRE(c.cluster.forceRemove(tessera::api::Kind::Node, "", "n2").ok());
  c.start();
}

}  // namespace

TEST_CASE("the snapshot keeps pods of a deleted node in their jobs, without the node", "[actions][deleted-node]") {
  TestCluster c;
  cluster(c);
  const auto s = c.snapshot();
  CHECK(s->findNode("n2") == nullptr);
  const auto* g = s->findJob("PodGroup/t/g");
  REQUIRE(g);
  bool running = false;
  for (const auto& t : g->tasks) running |= t.key == "t/g-0" && t.nodeName == "n2";
  CHECK(running);
}

TEST_CASE("every action survives running pods on a deleted node", "[actions][deleted-node]") {
  TestCluster c;
  cluster(c);
  const auto snap = c.snapshot();
  for (const auto& action : tessera::testing::testRegistry().actionNames()) {
    DYNAMIC_SECTION(action) {
      // No grace: a stale gang is evicted in the first cycle.
      nlohmann::json over = {{"actions", {action}},
                             {"actionArgs", {{"stalegangeviction", {{"gracePeriod", "0s"}}}}}};
      auto cfg = tessera::framework::loadConfig(tessera::testing::testRegistry(), &over);
      REQUIRE(cfg.ok());
      CHECK(survives([&] {
              Session ssn(snap, *cfg, c.clock);
              ssn.open();
              ssn.runActions();
              (void)ssn.close();
            }) == "");
    }
  }
}
