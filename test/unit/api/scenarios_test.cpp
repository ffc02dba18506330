// Converts every manifest of the shared acceptance scenarios (../shared/scenarios) through yamlToJson,
// kindOf and the matching fromJson. All must convert, except under badinput/ where a failure must name
// the object. Skipped when the shared folder is not checked out beside the repository.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"

using namespace tessera::api;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// Converts one manifest with the function for its kind; returns the error message or "".
std::string convertOne(const json& j) {
  auto kind = kindOf(j);
  if (!kind) return kind.error().message;
  auto msg = [](const auto& r) { return r.ok() ? std::string() : r.error().message; };
  switch (*kind) {
    case Kind::Pod: return msg(podFromJson(j));
    case Kind::Node: return msg(nodeFromJson(j));
    case Kind::PodGroup: return msg(podGroupFromJson(j));
    case Kind::Queue: return msg(queueFromJson(j));
    case Kind::Topology: return msg(topologyFromJson(j));
    case Kind::PriorityClass: return msg(priorityClassFromJson(j));
    case Kind::Namespace: return msg(namespaceFromJson(j));
    case Kind::ConfigMap: return msg(configMapFromJson(j));
    default: return msg(metaFromJson(j));  // Event, Lease and the workload kinds the pod grouper reads
  }
}

/// The manifests of a scenario: `objects` and every step's `apply`.
std::vector<json> manifests(const json& scenario) {
  std::vector<json> out;
  if (scenario.contains("objects") && scenario["objects"].is_array())
    for (const auto& o : scenario["objects"]) out.push_back(o);
  if (scenario.contains("steps") && scenario["steps"].is_array())
    for (const auto& step : scenario["steps"])
      if (step.is_object() && step.contains("apply") && step["apply"].is_array())
        for (const auto& o : step["apply"]) out.push_back(o);
  return out;
}

fs::path sharedScenarios() { return fs::path(TESSERA_TEST_DIR) / ".." / ".." / "shared" / "scenarios"; }

}  // namespace

TEST_CASE("scenarios: every shared manifest converts", "[convert][scenarios]") {
  const fs::path dir = sharedScenarios();
  if (!fs::is_directory(dir)) {
    WARN("no shared scenarios at " << dir.string() << ": skipped");
    return;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE_FALSE(files.empty());
  size_t converted = 0, kinds = 0;
  std::set<Kind> seen;
  for (const auto& file : files) {
    INFO(file.string());
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    auto docs = yamlToJson(ss.str());
    REQUIRE(docs.ok());
    REQUIRE(docs->size() == 1);
    const bool badInput = file.parent_path().filename() == "badinput";
    const auto objects = manifests(docs->front());
    CHECK_FALSE(objects.empty());
    for (size_t i = 0; i < objects.size(); ++i) {
      const json& o = objects[i];
      INFO("object " << i << ": " << describeObject(o));
      if (auto k = kindOf(o)) seen.insert(*k);
      const std::string err = convertOne(o);
      if (badInput) {
        // Either it converts (the scheduler rejects it later) or the error names the object first.
        if (!err.empty()) CHECK_THAT(err, Catch::StartsWith(describeObject(o) + ": "));
      } else {
        CHECK(err == "");
      }
      ++converted;
    }
  }
  kinds = seen.size();
  CHECK(converted > 100);
  CHECK(kinds >= 5);  // Pod, Node, Namespace, Queue, PodGroup at least
}

TEST_CASE("scenarios: known values of a shared manifest", "[convert][scenarios]") {
  const fs::path file = sharedScenarios() / "predicates" / "extended-resource.yaml";
  if (!fs::exists(file)) {
    WARN("no " << file.string() << ": skipped");
    return;
  }
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto docs = yamlToJson(ss.str());
  REQUIRE(docs.ok());
  bool sawFpgaNode = false, sawBigPod = false;
  for (const auto& o : manifests(docs->front())) {
    auto kind = kindOf(o);
    REQUIRE(kind.ok());
    if (*kind == Kind::Node && o["metadata"]["name"] == "fpga-1") {
      auto n = nodeFromJson(o);
      REQUIRE(n.ok());
      CHECK(n->allocatable.milliCpu == 32000);
      CHECK(n->allocatable.memory == 128LL << 30);
      CHECK(n->allocatable.get("example.com/fpga") == 2);
      CHECK(n->allocatablePods == 110);
      CHECK(n->ready);
      sawFpgaNode = true;
    }
    if (*kind == Kind::Pod && o["metadata"]["name"] == "fpga-big") {
      auto p = podFromJson(o);
      REQUIRE(p.ok());
      CHECK(p->meta.key() == "team-a/fpga-big");
      CHECK(p->schedulerName == "tessera");
      CHECK(p->requests.milliCpu == 2000);
      CHECK(p->requests.memory == 8LL << 30);
      CHECK(p->requests.get("example.com/fpga") == 3);
      CHECK(*p->meta.label("tessera.dev/queue") == "team-a");
      sawBigPod = true;
    }
  }
  CHECK(sawFpgaNode);
  CHECK(sawBigPod);
}
