// The in-memory cluster as an API server: create/get/list/update/patch/delete/bind semantics,
// resourceVersions, uids, selectors, paging and fault injection. Watches: memory_watch_test.cpp;
// the simulated kubelet: memory_kubelet_test.cpp.
#include <catch2/catch.hpp>

#include <set>

#include "tessera/api/clock.h"
#include "tessera/cache/memory_cluster.h"

namespace {

using tessera::api::FakeClock;
using tessera::api::Kind;
using tessera::api::parseTime;
using tessera::cache::DeleteOptions;
using tessera::cache::Json;
using tessera::cache::ListOptions;
using tessera::cache::MemoryCluster;
using tessera::cache::PatchType;

FakeClock startClock() { return FakeClock(parseTime("2026-01-01T00:00:00Z").value()); }

Json makePod(const std::string& ns, const std::string& name, Json labels = Json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"namespace", ns}, {"name", name}, {"labels", labels}}},
          {"spec", {{"schedulerName", "tessera"}, {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
}

Json makeNode(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status", {{"allocatable", {{"cpu", "8"}, {"memory", "32Gi"}, {"nvidia.com/gpu", "4"}}}}}};
}

Json makeQueue(const std::string& name) {
  return {{"apiVersion", "scheduling.tessera.dev/v1alpha1"}, {"kind", "Queue"}, {"metadata", {{"name", name}}}};
}

std::string rvOf(const Json& j) { return j["metadata"]["resourceVersion"].get<std::string>(); }

std::vector<std::string> names(const std::vector<Json>& items) {
  std::vector<std::string> out;
  for (const Json& j : items) {
    const Json& m = j["metadata"];
    out.push_back(m.contains("namespace") ? m["namespace"].get<std::string>() + "/" + m["name"].get<std::string>()
                                          : m["name"].get<std::string>());
  }
  return out;
}

}  // namespace

TEST_CASE("create assigns uid, resourceVersion, creationTimestamp and defaults", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  auto created = cluster.create(Kind::Pod, makePod("team-a", "p0"));
  REQUIRE(created.ok());
  const Json& meta = created->at("metadata");
  CHECK(meta["uid"] == "00000000-0000-4000-8000-000000000001");
  CHECK(meta["creationTimestamp"] == "2026-01-01T00:00:00Z");
  CHECK_FALSE(rvOf(*created).empty());
  CHECK(created->at("status")["phase"] == "Pending");

  auto got = cluster.get(Kind::Pod, "team-a", "p0");
  REQUIRE(got.ok());
  CHECK(*got == *created);

  SECTION("a given creationTimestamp is kept") {
    Json p = makePod("team-a", "p1");
    p["metadata"]["creationTimestamp"] = "2025-12-31T23:59:59Z";
    CHECK(cluster.create(Kind::Pod, p)->at("metadata")["creationTimestamp"] == "2025-12-31T23:59:59Z");
  }
  SECTION("a taken name is 409") {
    auto again = cluster.create(Kind::Pod, makePod("team-a", "p0"));
    REQUIRE_FALSE(again.ok());
    CHECK(again.error().code == 409);
    CHECK_THAT(again.error().message, Catch::Contains("already exists"));
  }
  SECTION("a namespaced kind without a namespace is 422 naming the field") {
    Json p = makePod("x", "p2");
    p["metadata"].erase("namespace");
    auto r = cluster.create(Kind::Pod, p);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == 422);
    CHECK_THAT(r.error().message, Catch::Contains("metadata.namespace"));
  }
  SECTION("an object without a name is 422") {
    Json p = makePod("x", "");
    auto r = cluster.create(Kind::Pod, p);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == 422);
    CHECK_THAT(r.error().message, Catch::Contains("metadata.name"));
  }
  SECTION("cluster-scoped objects drop a namespace and get apiVersion/kind") {
    Json n = makeNode("n1");
    n.erase("apiVersion");
    n.erase("kind");
    n["metadata"]["namespace"] = "default";
    auto r = cluster.create(Kind::Node, n);
    REQUIRE(r.ok());
    CHECK_FALSE(r->at("metadata").contains("namespace"));
    CHECK(r->at("apiVersion") == "v1");
    CHECK(r->at("kind") == "Node");
    CHECK(cluster.get(Kind::Node, "", "n1").ok());
  }
  SECTION("get of a missing object is 404") {
    auto r = cluster.get(Kind::Pod, "team-a", "nope");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == 404);
  }
}

TEST_CASE("uids sort in creation order", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  std::string previous;
  for (int i = 0; i < 12; ++i) {
    // Names in reverse order, so that creation order differs from name order.
    auto r = cluster.create(Kind::Pod, makePod("ns", "p" + std::to_string(100 - i)));
    REQUIRE(r.ok());
    std::string uid = r->at("metadata")["uid"];
    CHECK(uid > previous);
    previous = uid;
  }
  // Across kinds too: one counter.
  std::string nodeUid = cluster.create(Kind::Node, makeNode("n"))->at("metadata")["uid"];
  CHECK(nodeUid > previous);
}

TEST_CASE("generateName appends a deterministic 5-character suffix", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster a(clock), b(clock);
  std::vector<std::string> fromA, fromB;
  for (int i = 0; i < 5; ++i) {
    Json p = makePod("ns", "");
    p["metadata"].erase("name");
    p["metadata"]["generateName"] = "job-";
    auto ra = a.create(Kind::Pod, p);
    auto rb = b.create(Kind::Pod, p);
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    fromA.push_back(ra->at("metadata")["name"]);
    fromB.push_back(rb->at("metadata")["name"]);
  }
  CHECK(fromA == fromB);
  std::set<std::string> distinct(fromA.begin(), fromA.end());
  CHECK(distinct.size() == 5);
  for (const auto& n : fromA) {
    CHECK(n.rfind("job-", 0) == 0);
    CHECK(n.size() == 9);
  }
}

TEST_CASE("resourceVersions change on every write and only then", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  std::set<std::string> seen;
  seen.insert(cluster.list(Kind::Pod)->resourceVersion);
  auto p = cluster.create(Kind::Pod, makePod("ns", "p"));
  CHECK(seen.insert(rvOf(*p)).second);
  CHECK(cluster.list(Kind::Pod)->resourceVersion == rvOf(*p));
  // The collection RV is global: a write of another kind moves it.
  auto n = cluster.create(Kind::Node, makeNode("n"));
  CHECK(seen.insert(rvOf(*n)).second);
  CHECK(cluster.list(Kind::Pod)->resourceVersion == rvOf(*n));
  auto patched = cluster.patch(Kind::Pod, "ns", "p", PatchType::Merge, {{"metadata", {{"labels", {{"a", "b"}}}}}});
  REQUIRE(patched.ok());
  CHECK(seen.insert(rvOf(*patched)).second);
  // A patch that changes nothing is not a write.
  auto same = cluster.patch(Kind::Pod, "ns", "p", PatchType::Merge, {{"metadata", {{"labels", {{"a", "b"}}}}}});
  REQUIRE(same.ok());
  CHECK(rvOf(*same) == rvOf(*patched));
  CHECK(cluster.list(Kind::Pod)->resourceVersion == rvOf(*patched));
}

TEST_CASE("list returns items sorted by namespace then name", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  for (auto [ns, name] : std::vector<std::pair<std::string, std::string>>{
           {"a-b", "x"}, {"a", "z"}, {"a", "y"}, {"b", "a"}}) {
    REQUIRE(cluster.create(Kind::Pod, makePod(ns, name)).ok());
  }
  auto all = cluster.list(Kind::Pod);
  REQUIRE(all.ok());
  CHECK(names(all->items) == std::vector<std::string>{"a/y", "a/z", "a-b/x", "b/a"});
  CHECK(all->continueToken.empty());
  ListOptions inA;
  inA.namespace_ = "a";
  CHECK(names(cluster.list(Kind::Pod, inA)->items) == std::vector<std::string>{"a/y", "a/z"});
  CHECK(cluster.list(Kind::Node)->items.empty());
}

TEST_CASE("update checks the resourceVersion and leaves server fields and status alone", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  Json p = makePod("ns", "p");
  p["status"] = {{"phase", "Running"}};
  Json created = *cluster.create(Kind::Pod, p);
  clock.advance({60000});

  SECTION("stale resourceVersion is 409 Conflict") {
    Json first = created;
    first["metadata"]["labels"]["v"] = "1";
    auto ok = cluster.update(Kind::Pod, first);
    REQUIRE(ok.ok());
    CHECK(rvOf(*ok) != rvOf(created));
    Json stale = created;
    stale["metadata"]["labels"]["v"] = "2";
    auto r = cluster.update(Kind::Pod, stale);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == 409);
    CHECK(cluster.get(Kind::Pod, "ns", "p")->at("metadata")["labels"]["v"] == "1");
  }
  SECTION("an empty resourceVersion is unconditional; uid, creationTimestamp and status are kept") {
    Json next = created;
    next["metadata"].erase("resourceVersion");
    next["metadata"]["uid"] = "";
    next["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z";
    next["metadata"]["labels"]["x"] = "y";
    next["status"]["phase"] = "Failed";
    auto r = cluster.update(Kind::Pod, next);
    REQUIRE(r.ok());
    CHECK(r->at("metadata")["uid"] == created["metadata"]["uid"]);
    CHECK(r->at("metadata")["creationTimestamp"] == "2026-01-01T00:00:00Z");
    CHECK(r->at("metadata")["labels"]["x"] == "y");
    CHECK(r->at("status")["phase"] == "Running");
  }
  SECTION("kinds without a status subresource take the status") {
    Json cm = {{"metadata", {{"namespace", "ns"}, {"name", "cm"}}}, {"data", {{"a", "1"}}}};
    Json c = *cluster.create(Kind::ConfigMap, cm);
    c["data"]["a"] = "2";
    CHECK(cluster.update(Kind::ConfigMap, c)->at("data")["a"] == "2");
  }
  SECTION("updating a missing object is 404") {
    Json other = makePod("ns", "missing");
    CHECK(cluster.update(Kind::Pod, other).error().code == 404);
  }
  SECTION("updateStatus replaces only the status") {
    Json next = created;
    next["status"] = {{"phase", "Succeeded"}};
    next["metadata"]["labels"]["ignored"] = "yes";
    auto r = cluster.updateStatus(Kind::Pod, next);
    REQUIRE(r.ok());
    CHECK(r->at("status")["phase"] == "Succeeded");
    CHECK_FALSE(r->at("metadata")["labels"].contains("ignored"));
    // The RV precondition applies there too.
    CHECK(cluster.updateStatus(Kind::Pod, next).error().code == 409);
  }
}

TEST_CASE("patch: merge, JSON patch and strategic merge", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  Json p = makePod("ns", "p", {{"app", "x"}, {"tier", "web"}});
  p["spec"]["tolerations"] = {{{"key", "a"}, {"operator", "Exists"}}, {{"key", "b"}, {"operator", "Exists"}}};
  p["status"] = {{"phase", "Pending"},
                 {"conditions",
                  {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}},
                   {{"type", "Ready"}, {"status", "False"}}}}};
  REQUIRE(cluster.create(Kind::Pod, p).ok());

  SECTION("merge patch adds, replaces and removes keys; status is ignored without the subresource") {
    auto r = cluster.patch(Kind::Pod, "ns", "p", PatchType::Merge,
                           {{"metadata", {{"labels", {{"app", "y"}, {"tier", nullptr}}}}},
                            {"status", {{"phase", "Running"}}}});
    REQUIRE(r.ok());
    CHECK(r->at("metadata")["labels"] == Json{{"app", "y"}});
    CHECK(r->at("status")["phase"] == "Pending");
  }
  SECTION("with the status subresource only the status changes") {
    auto r = cluster.patch(Kind::Pod, "ns", "p", PatchType::Merge,
                           {{"metadata", {{"labels", {{"app", "y"}}}}}, {"status", {{"phase", "Running"}}}},
                           /*statusSubresource=*/true);
    REQUIRE(r.ok());
    CHECK(r->at("metadata")["labels"]["app"] == "x");
    CHECK(r->at("status")["phase"] == "Running");
  }
  SECTION("JSON patch, and its errors are 422") {
    auto r = cluster.patch(Kind::Pod, "ns", "p", PatchType::JsonPatch,
                           Json::array({{{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{"k", "v"}}}}}));
    REQUIRE(r.ok());
    CHECK(r->at("metadata")["annotations"]["k"] == "v");
    auto bad = cluster.patch(Kind::Pod, "ns", "p", PatchType::JsonPatch,
                             Json::array({{{"op", "remove"}, {"path", "/spec/nope"}}}));
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == 422);
    auto failedTest = cluster.patch(Kind::Pod, "ns", "p", PatchType::JsonPatch,
                                    Json::array({{{"op", "test"}, {"path", "/metadata/name"}, {"value", "q"}}}));
    REQUIRE_FALSE(failedTest.ok());
    CHECK(failedTest.error().code == 422);
  }
  SECTION("strategic merge merges conditions by type and replaces other lists") {
    Json patch = {{"status",
                   {{"conditions",
                     {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"},
                       {"message", "0/3 nodes are available"}},
                      {{"type", "DisruptionTarget"}, {"status", "True"}}}}}}};
    auto r = cluster.patch(Kind::Pod, "ns", "p", PatchType::StrategicMerge, patch, true);
    REQUIRE(r.ok());
    const Json& conditions = r->at("status")["conditions"];
    REQUIRE(conditions.size() == 3);
    CHECK(conditions[0]["type"] == "PodScheduled");
    CHECK(conditions[0]["message"] == "0/3 nodes are available");
    CHECK(conditions[1]["type"] == "Ready");
    CHECK(conditions[2]["type"] == "DisruptionTarget");

    auto t = cluster.patch(Kind::Pod, "ns", "p", PatchType::StrategicMerge,
                           {{"spec", {{"tolerations", {{{"key", "c"}, {"operator", "Exists"}}}}}}});
    REQUIRE(t.ok());
    CHECK(t->at("spec")["tolerations"].size() == 1);

    auto del = cluster.patch(Kind::Pod, "ns", "p", PatchType::StrategicMerge,
                             {{"status", {{"conditions", {{{"type", "Ready"}, {"$patch", "delete"}}}}}}}, true);
    REQUIRE(del.ok());
    CHECK(del->at("status")["conditions"].size() == 2);

    // Containers merge by name (the image is one of the few fields a pod update may change).
    const Json before = cluster.get(Kind::Pod, "ns", "p").value()["spec"]["containers"][0];
    auto containers = cluster.patch(Kind::Pod, "ns", "p", PatchType::StrategicMerge,
                                    {{"spec", {{"containers", {{{"name", "main"}, {"image", "busybox:2"}}}}}}});
    REQUIRE(containers.ok());
    REQUIRE(containers->at("spec")["containers"].size() == 1);
    CHECK(containers->at("spec")["containers"][0]["image"] == "busybox:2");
    Json rest = containers->at("spec")["containers"][0], was = before;
    rest.erase("image"), was.erase("image");
    CHECK(rest == was);
  }
  SECTION("a pod's spec is immutable but for images, tolerations and deadlines (422, as kube-apiserver)") {
    auto resources = cluster.patch(
        Kind::Pod, "ns", "p", PatchType::StrategicMerge,
        {{"spec", {{"containers", {{{"name", "main"}, {"resources", {{"limits", {{"cpu", "1"}}}}}}}}}}});
    REQUIRE_FALSE(resources.ok());
    CHECK(resources.error().code == 422);
    CHECK_THAT(resources.error().message, Catch::Contains("pod updates may not change fields"));
    Json pod = cluster.get(Kind::Pod, "ns", "p").value();
    pod["spec"]["schedulerName"] = "other";
    auto update = cluster.update(Kind::Pod, pod);
    REQUIRE_FALSE(update.ok());
    CHECK(update.error().code == 422);
    pod["spec"]["schedulerName"] = cluster.get(Kind::Pod, "ns", "p").value()["spec"].value("schedulerName", "");
    pod["spec"]["activeDeadlineSeconds"] = 60;
    CHECK(cluster.update(Kind::Pod, pod).ok());
  }
  SECTION("names and labels are validated as kube-apiserver does") {
    Json bad = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "Upper"}, {"namespace", "ns"}}}};
    auto upper = cluster.create(Kind::ConfigMap, bad);
    REQUIRE_FALSE(upper.ok());
    CHECK(upper.error().code == 422);
    std::string longest;  // 253: four labels of 62 and one of 1, dot-separated
    for (int i = 0; i < 4; ++i) longest += std::string(62, 'a') + ".";
    longest += "a";
    REQUIRE(longest.size() == 253);
    bad["metadata"]["name"] = longest + "a";
    CHECK_FALSE(cluster.create(Kind::ConfigMap, bad).ok());
    bad["metadata"]["name"] = std::string(64, 'a');  // a label of more than 63
    CHECK_FALSE(cluster.create(Kind::ConfigMap, bad).ok());
    bad["metadata"]["name"] = longest;
    CHECK(cluster.create(Kind::ConfigMap, bad).ok());
    Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "a.b"}}}};
    CHECK_FALSE(cluster.create(Kind::Namespace, ns).ok());  // a label: no dots
    Json labelled = {{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", {{"name", "l"}, {"namespace", "ns"}, {"labels", {{"a", std::string(64, 'v')}}}}}};
    CHECK_FALSE(cluster.create(Kind::ConfigMap, labelled).ok());
    labelled["metadata"]["labels"] = {{"example.com/ok-key_1", "v.1-x"}, {"empty", ""}};
    CHECK(cluster.create(Kind::ConfigMap, labelled).ok());
    labelled["metadata"]["name"] = "l2";
    labelled["metadata"]["labels"] = {{"bad key", "v"}};
    CHECK_FALSE(cluster.create(Kind::ConfigMap, labelled).ok());
  }
  SECTION("strategic merge of a custom resource is 415, as from the API server") {
    REQUIRE(cluster.create(Kind::Queue, makeQueue("q")).ok());
    auto r = cluster.patch(Kind::Queue, "", "q", PatchType::StrategicMerge, {{"spec", {{"priority", 1}}}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == 415);
    CHECK(cluster.patch(Kind::Queue, "", "q", PatchType::Merge, {{"spec", {{"priority", 1}}}}).ok());
  }
  SECTION("a resourceVersion in the patch is a precondition") {
    auto r = cluster.patch(Kind::Pod, "ns", "p", PatchType::Merge, {{"metadata", {{"resourceVersion", "1"}}}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == 409);
  }
  SECTION("patching a missing object is 404; renaming is 422") {
    CHECK(cluster.patch(Kind::Pod, "ns", "q", PatchType::Merge, Json::object()).error().code == 404);
    CHECK(cluster.patch(Kind::Pod, "ns", "p", PatchType::Merge, {{"metadata", {{"name", "q"}}}}).error().code ==
          422);
  }
}

TEST_CASE("remove: bound running pods terminate, everything else goes at once", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());
  auto bound = [&](const std::string& name) {
    REQUIRE(cluster.create(Kind::Pod, makePod("ns", name)).ok());
    REQUIRE(cluster.bind("ns", name, "", "n1").ok());
  };

  SECTION("unbound pods and other kinds are deleted") {
    REQUIRE(cluster.create(Kind::Pod, makePod("ns", "free")).ok());
    CHECK(cluster.remove(Kind::Pod, "ns", "free").ok());
    CHECK(cluster.get(Kind::Pod, "ns", "free").error().code == 404);
    CHECK(cluster.remove(Kind::Node, "", "n1").ok());
    CHECK(cluster.get(Kind::Node, "", "n1").error().code == 404);
    CHECK(cluster.remove(Kind::Pod, "ns", "free").error().code == 404);
  }
  SECTION("a bound pod gets deletionTimestamp = now + the default 30s grace") {
    bound("b");
    REQUIRE(cluster.remove(Kind::Pod, "ns", "b").ok());
    auto p = cluster.get(Kind::Pod, "ns", "b");
    REQUIRE(p.ok());
    CHECK(p->at("metadata")["deletionTimestamp"] == "2026-01-01T00:00:30Z");
    CHECK(p->at("metadata")["deletionGracePeriodSeconds"] == 30);
    std::string rv = rvOf(*p);
    // Deleting again changes nothing.
    REQUIRE(cluster.remove(Kind::Pod, "ns", "b", DeleteOptions{0, ""}).ok());
    CHECK(rvOf(*cluster.get(Kind::Pod, "ns", "b")) == rv);
    // It cannot be bound any more.
    CHECK(cluster.bind("ns", "b", "", "n1").error().code == 409);
  }
  SECTION("grace from options, then from spec.terminationGracePeriodSeconds") {
    bound("zero");
    REQUIRE(cluster.remove(Kind::Pod, "ns", "zero", DeleteOptions{0, ""}).ok());
    CHECK(cluster.get(Kind::Pod, "ns", "zero")->at("metadata")["deletionTimestamp"] == "2026-01-01T00:00:00Z");
    CHECK(cluster.get(Kind::Pod, "ns", "zero")->at("metadata")["deletionGracePeriodSeconds"] == 0);
    REQUIRE(cluster.create(Kind::Pod, [] {
                     Json p = makePod("ns", "spec");
                     p["spec"]["terminationGracePeriodSeconds"] = 5;
                     return p;
                   }())
                .ok());
    REQUIRE(cluster.bind("ns", "spec", "", "n1").ok());
    REQUIRE(cluster.remove(Kind::Pod, "ns", "spec").ok());
    CHECK(cluster.get(Kind::Pod, "ns", "spec")->at("metadata")["deletionTimestamp"] == "2026-01-01T00:00:05Z");
  }
  SECTION("a terminal bound pod goes at once") {
    bound("done");
    REQUIRE(cluster.finishPod("ns", "done", true).ok());
    REQUIRE(cluster.remove(Kind::Pod, "ns", "done").ok());
    CHECK(cluster.get(Kind::Pod, "ns", "done").error().code == 404);
  }
  SECTION("a uid precondition that does not match is 409") {
    bound("u");
    auto r = cluster.remove(Kind::Pod, "ns", "u", DeleteOptions{std::nullopt, "other-uid"});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == 409);
    std::string uid = cluster.get(Kind::Pod, "ns", "u")->at("metadata")["uid"];
    CHECK(cluster.remove(Kind::Pod, "ns", "u", DeleteOptions{std::nullopt, uid}).ok());
  }
  SECTION("forceRemove deletes whatever the state") {
    bound("f");
    REQUIRE(cluster.forceRemove(Kind::Pod, "ns", "f").ok());
    CHECK(cluster.get(Kind::Pod, "ns", "f").error().code == 404);
    CHECK(cluster.forceRemove(Kind::Pod, "ns", "f").error().code == 404);
  }
}

TEST_CASE("bind sets nodeName and PodScheduled, and refuses what the API server refuses", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());
  Json p = *cluster.create(Kind::Pod, makePod("team-a", "big-0"));
  std::string uid = p["metadata"]["uid"];

  CHECK(cluster.bind("team-a", "big-0", "wrong-uid", "n1").error().code == 409);
  auto noNode = cluster.bind("team-a", "big-0", uid, "n9");
  REQUIRE_FALSE(noNode.ok());
  CHECK(noNode.error().code == 404);
  CHECK_THAT(noNode.error().message, Catch::Contains("n9"));
  CHECK(cluster.bind("team-a", "nope", "", "n1").error().code == 404);

  REQUIRE(cluster.bind("team-a", "big-0", uid, "n1").ok());
  Json after = *cluster.get(Kind::Pod, "team-a", "big-0");
  CHECK(after["spec"]["nodeName"] == "n1");
  REQUIRE(after["status"]["conditions"].size() == 1);
  CHECK(after["status"]["conditions"][0]["type"] == "PodScheduled");
  CHECK(after["status"]["conditions"][0]["status"] == "True");

  auto again = cluster.bind("team-a", "big-0", "", "n1");
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == 409);
  CHECK(again.error().message == "pod team-a/big-0 is already assigned to node \"n1\"");
}

TEST_CASE("label and field selectors", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());
  REQUIRE(cluster.create(Kind::Pod, makePod("ns", "a", {{"app", "x"}, {"tier", "web"}})).ok());
  REQUIRE(cluster.create(Kind::Pod, makePod("ns", "b", {{"app", "y"}})).ok());
  REQUIRE(cluster.create(Kind::Pod, makePod("ns", "c", {{"app", "z"}, {"gpu", "true"}})).ok());
  REQUIRE(cluster.create(Kind::Pod, makePod("other", "d")).ok());
  REQUIRE(cluster.bind("ns", "a", "", "n1").ok());
  REQUIRE(cluster.finishPod("ns", "c", false).ok());

  auto select = [&](const std::string& labels, const std::string& fields = "") {
    ListOptions o;
    o.labelSelector = labels;
    o.fieldSelector = fields;
    auto r = cluster.list(Kind::Pod, o);
    REQUIRE(r.ok());
    return names(r->items);
  };
  using V = std::vector<std::string>;
  CHECK(select("app=x") == V{"ns/a"});
  CHECK(select("app==y") == V{"ns/b"});
  CHECK(select("app!=x") == V{"ns/b", "ns/c", "other/d"});
  CHECK(select("app in (x, z)") == V{"ns/a", "ns/c"});
  CHECK(select("app notin (x,z)") == V{"ns/b", "other/d"});
  CHECK(select("gpu") == V{"ns/c"});
  CHECK(select("!app") == V{"other/d"});
  CHECK(select("app,!tier") == V{"ns/b", "ns/c"});
  CHECK(select("app=x,tier=web") == V{"ns/a"});
  CHECK(select("", "spec.nodeName=n1") == V{"ns/a"});
  CHECK(select("", "spec.nodeName=") == V{"ns/b", "ns/c", "other/d"});
  CHECK(select("", "status.phase!=Failed,metadata.namespace=ns") == V{"ns/a", "ns/b"});
  CHECK(select("", "metadata.name=d") == V{"other/d"});
  CHECK(select("app", "spec.schedulerName==tessera,spec.nodeName!=n1") == V{"ns/b", "ns/c"});

  ListOptions bad;
  bad.labelSelector = "app in (x";
  CHECK(cluster.list(Kind::Pod, bad).error().code == 400);
  bad.labelSelector = "";
  bad.fieldSelector = "spec.priority=1";
  auto unsupported = cluster.list(Kind::Pod, bad);
  REQUIRE_FALSE(unsupported.ok());
  CHECK(unsupported.error().code == 400);
  CHECK_THAT(unsupported.error().message, Catch::Contains("spec.priority"));
}

TEST_CASE("paging with limit and continue serves one consistent list", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  for (const char* name : {"a", "b", "c", "d", "e"}) REQUIRE(cluster.create(Kind::Pod, makePod("ns", name)).ok());
  ListOptions o;
  o.limit = 2;
  auto first = cluster.list(Kind::Pod, o);
  REQUIRE(first.ok());
  CHECK(names(first->items) == std::vector<std::string>{"ns/a", "ns/b"});
  REQUIRE_FALSE(first->continueToken.empty());

  // Writes between pages are not seen by the rest of the list.
  REQUIRE(cluster.remove(Kind::Pod, "ns", "d").ok());
  REQUIRE(cluster.create(Kind::Pod, makePod("ns", "bb")).ok());
  REQUIRE(cluster.patch(Kind::Pod, "ns", "c", PatchType::Merge, {{"metadata", {{"labels", {{"new", "1"}}}}}}).ok());

  o.continueToken = first->continueToken;
  auto second = cluster.list(Kind::Pod, o);
  REQUIRE(second.ok());
  CHECK(names(second->items) == std::vector<std::string>{"ns/c", "ns/d"});
  CHECK_FALSE(second->items[0]["metadata"]["labels"].contains("new"));
  CHECK(second->resourceVersion == first->resourceVersion);
  o.continueToken = second->continueToken;
  auto third = cluster.list(Kind::Pod, o);
  REQUIRE(third.ok());
  CHECK(names(third->items) == std::vector<std::string>{"ns/e"});
  CHECK(third->continueToken.empty());

  SECTION("the last page has no token when it ends exactly at the limit") {
    ListOptions four;
    four.limit = 5;
    auto all = cluster.list(Kind::Pod, four);
    CHECK(all->items.size() == 5);
    CHECK(all->continueToken.empty());
  }
  SECTION("a token older than the watch window is 410; a garbage token is 400") {
    cluster.setWatchWindow(1);
    o.continueToken = first->continueToken;
    CHECK(cluster.list(Kind::Pod, o).error().code == 410);
    o.continueToken = "zz";
    CHECK(cluster.list(Kind::Pod, o).error().code == 400);
  }
}

TEST_CASE("apply creates or replaces, keeping uid and creationTimestamp", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  Json q = makeQueue("q");
  Json created = *cluster.apply(Kind::Queue, q);
  clock.advance({1000});
  q["spec"] = {{"priority", 5}};
  auto replaced = cluster.apply(Kind::Queue, q);
  REQUIRE(replaced.ok());
  CHECK(replaced->at("metadata")["uid"] == created["metadata"]["uid"]);
  CHECK(replaced->at("metadata")["creationTimestamp"] == "2026-01-01T00:00:00Z");
  CHECK(replaced->at("spec")["priority"] == 5);
  CHECK(rvOf(*replaced) != rvOf(created));

  Json withUid = makePod("ns", "given");
  withUid["metadata"]["uid"] = "custom-uid";
  CHECK(cluster.apply(Kind::Pod, withUid)->at("metadata")["uid"] == "custom-uid");
}

TEST_CASE("failNthCall fails exactly the nth call of a verb", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  cluster.failNthCall("create", 2, 503);
  CHECK(cluster.create(Kind::Pod, makePod("ns", "a")).ok());
  auto second = cluster.create(Kind::Pod, makePod("ns", "b"));
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == 503);
  CHECK(cluster.get(Kind::Pod, "ns", "b").error().code == 404);
  CHECK(cluster.create(Kind::Pod, makePod("ns", "b")).ok());

  REQUIRE(cluster.create(Kind::Node, makeNode("n1")).ok());
  cluster.failNthCall("bind", 1);
  CHECK(cluster.bind("ns", "a", "", "n1").error().code == 500);
  CHECK(cluster.bind("ns", "a", "", "n1").ok());

  cluster.failNthCall("list", 1, 0);
  CHECK(cluster.list(Kind::Pod).error().code == 0);
  CHECK(cluster.list(Kind::Pod).ok());

  cluster.failNthCall("remove", 1);
  cluster.failNthCall("remove", 0);  // disarmed
  CHECK(cluster.remove(Kind::Pod, "ns", "b").ok());

  // updateStatus counts as "update"; "get" can fail too.
  cluster.failNthCall("update", 1, 409);
  Json a = *cluster.get(Kind::Pod, "ns", "a");
  CHECK(cluster.updateStatus(Kind::Pod, a).error().code == 409);
  cluster.failNthCall("get", 1, 0);
  CHECK(cluster.get(Kind::Pod, "ns", "a").error().code == 0);
  CHECK(cluster.get(Kind::Pod, "ns", "a").ok());
}

TEST_CASE("malformed objects are 422 naming the field", "[memory]") {
  FakeClock clock = startClock();
  MemoryCluster cluster(clock);
  Json p = makePod("ns", "p");
  p["metadata"]["labels"] = {{"replica", 1}};
  auto numeric = cluster.create(Kind::Pod, p);
  REQUIRE_FALSE(numeric.ok());
  CHECK(numeric.error().code == 422);
  CHECK_THAT(numeric.error().message, Catch::Contains("metadata.labels.replica"));
  CHECK(cluster.create(Kind::Pod, Json::array()).error().code == 422);

  REQUIRE(cluster.create(Kind::Pod, makePod("ns", "p")).ok());
  auto specList = cluster.patch(Kind::Pod, "ns", "p", PatchType::Merge, {{"spec", Json::array()}});
  REQUIRE_FALSE(specList.ok());
  CHECK(specList.error().code == 422);
  CHECK_THAT(specList.error().message, Catch::Contains("spec"));
  // A JSON patch that drops apiVersion gets it back, as the server always sets it.
  auto r = cluster.patch(Kind::Pod, "ns", "p", PatchType::JsonPatch,
                         Json::array({{{"op", "remove"}, {"path", "/apiVersion"}}}));
  REQUIRE(r.ok());
  CHECK(r->at("apiVersion") == "v1");
}
