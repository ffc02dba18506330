// What the test API server tells kubectl: discovery, OpenAPI v3 and Table answers, with the CRD facts
// read from deploy/crds.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "../src/cache/client/http/discovery.h"
#include "../src/cache/client/http/table.h"
#include "tessera/api/convert.h"

using namespace tessera;
using namespace tessera::cache;
using namespace tessera::cache::http;

namespace {

const Json* resource(const Json& list, const std::string& name) {
  for (const Json& r : list.at("resources"))
    if (r.at("name") == name) return &r;
  return nullptr;
}

Json crdFile(const std::string& name) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/deploy/crds/" + name);
  std::stringstream buf;
  buf << in.rdbuf();
  auto docs = api::yamlToJson(buf.str());
  REQUIRE(docs.ok());
  return docs->front();
}

api::Time at(const char* text) { return api::parseTime(text).value(); }

}  // namespace

TEST_CASE("discovery lists our kinds with the short names and categories of deploy/crds") {
  auto list = discoveryDocument("/apis/scheduling.tessera.dev/v1alpha1");
  REQUIRE(list);
  CHECK(list->at("kind") == "APIResourceList");
  const Json* queues = resource(*list, "queues");
  REQUIRE(queues);
  CHECK(queues->at("shortNames") == Json::array({"q"}));
  CHECK(queues->at("categories") == Json::array({"tessera"}));
  CHECK(queues->at("namespaced") == false);
  REQUIRE(resource(*list, "podgroups"));
  CHECK(resource(*list, "podgroups")->at("shortNames") == Json::array({"pg"}));
  CHECK(resource(*list, "podgroups/status"));
  CHECK_FALSE(resource(*list, "topologies/status"));  // the Topology CRD has no status subresource

  auto core = discoveryDocument("/api/v1/");
  REQUIRE(core);
  REQUIRE(resource(*core, "pods"));
  CHECK(resource(*core, "pods")->at("shortNames") == Json::array({"po"}));
  CHECK(resource(*core, "pods/binding")->at("verbs") == Json::array({"create"}));

  auto groups = discoveryDocument("/apis");
  REQUIRE(groups);
  bool batch = false;
  for (const Json& g : groups->at("groups")) batch = batch || g.at("name") == "batch";
  CHECK(batch);
  CHECK(discoveryDocument("/version")->at("major") == "1");
  CHECK_FALSE(discoveryDocument("/apis/nothing.example.com/v1"));
  CHECK_FALSE(discoveryDocument("/api/v1/pods"));  // a resource path, not discovery
}

TEST_CASE("the printer columns and schema are those of the CRD files") {
  const Json crd = crdFile("scheduling.tessera.dev_queues.yaml");
  const Json& version = crd.at("spec").at("versions").at(0);
  const ResourceFacts& facts = resourceFacts(api::Kind::Queue);
  REQUIRE(facts.printerColumns.size() == version.at("additionalPrinterColumns").size());
  for (size_t i = 0; i < facts.printerColumns.size(); ++i) {
    CHECK(facts.printerColumns[i].name == version.at("additionalPrinterColumns")[i].at("name"));
    CHECK(facts.printerColumns[i].jsonPath == version.at("additionalPrinterColumns")[i].at("jsonPath"));
  }
  CHECK(facts.schema == version.at("schema").at("openAPIV3Schema"));
}

TEST_CASE("OpenAPI v3: an index, and per group-version documents kubectl apply and explain use") {
  auto index = discoveryDocument("/openapi/v3");
  REQUIRE(index);
  const std::string url = index->at("paths").at("apis/scheduling.tessera.dev/v1alpha1").at("serverRelativeURL");
  CHECK(url.starts_with("/openapi/v3/apis/scheduling.tessera.dev/v1alpha1?hash="));
  auto doc = discoveryDocument("/openapi/v3/apis/scheduling.tessera.dev/v1alpha1");
  REQUIRE(doc);
  const Json& one = doc->at("paths").at("/apis/scheduling.tessera.dev/v1alpha1/namespaces/{namespace}/podgroups/{name}");
  CHECK(one.at("patch").at("x-kubernetes-group-version-kind").at("kind") == "PodGroup");
  bool fieldValidation = false;
  for (const Json& p : one.at("parameters")) fieldValidation = fieldValidation || p.at("name") == "fieldValidation";
  CHECK(fieldValidation);
  // Strategic merge is not offered for a custom resource (kubectl then sends a merge patch).
  CHECK_FALSE(one.at("patch").at("requestBody").at("content").contains("application/strategic-merge-patch+json"));
  const Json& schema = doc->at("components").at("schemas").at("dev.tessera.scheduling.v1alpha1.Queue");
  CHECK(schema.at("x-kubernetes-group-version-kind").at(0).at("kind") == "Queue");
  CHECK(schema.at("properties").at("spec").at("properties").contains("parentQueue"));
  CHECK(discoveryDocument("/openapi/v3/api/v1")->at("components").at("schemas").contains("io.k8s.api.core.v1.Pod"));
  CHECK(isCustomResource(api::Kind::Queue));
  CHECK(isCustomResource(api::Kind::PyTorchJob));
  CHECK_FALSE(isCustomResource(api::Kind::Job));
  CHECK_FALSE(isCustomResource(api::Kind::Lease));
}

TEST_CASE("Table: a CRD's printer columns, escaped dots, [*], dates and missing values") {
  const Json queue = {{"metadata", {{"name", "team-a"}, {"creationTimestamp", "2026-01-01T00:00:00Z"}}},
                      {"spec", {{"priority", 7}, {"resources", {{"gpu", {{"quota", "8"}}}}}}},
                      {"status", {{"allocated", {{"nvidia.com/gpu", "3"}}}}}};
  const TableRequest request = tableRequest("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "");
  REQUIRE(request.tableVersion == "v1");
  const Json table = toTable(api::Kind::Queue, Json::array({queue}), request, at("2026-01-01T00:05:00Z"), "42");
  CHECK(table.at("kind") == "Table");
  CHECK(table.at("apiVersion") == "meta.k8s.io/v1");
  CHECK(table.at("metadata").at("resourceVersion") == "42");
  std::vector<std::string> names;
  for (const Json& c : table.at("columnDefinitions")) names.push_back(c.at("name"));
  CHECK(names == std::vector<std::string>{"Name", "Parent", "Priority", "GPU Quota", "GPU Limit", "GPU Allocated",
                                          "GPU Fair Share", "Age"});
  const Json& cells = table.at("rows").at(0).at("cells");
  CHECK(cells == Json::array({"team-a", nullptr, 7, "8", nullptr, "3", nullptr, "5m"}));
  CHECK(table.at("rows").at(0).at("object").at("kind") == "PartialObjectMetadata");

  const Json topology = {{"metadata", {{"name", "t"}}},
                         {"spec", {{"levels", {{{"nodeLabel", "zone"}}, {{"nodeLabel", "rack"}}}}}}};
  const Json t = toTable(api::Kind::Topology, Json::array({topology}), request, at("2026-01-01T00:00:00Z"));
  CHECK(t.at("rows").at(0).at("cells").at(1) == "zone,rack");

  CHECK(tableRequest("application/json", "").tableVersion.empty());
  CHECK(tableRequest("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "None").tableVersion == "v1beta1");
  const Json bare = toTable(api::Kind::Queue, Json::array({queue}), tableRequest("application/json;as=Table;v=v1;g=meta.k8s.io", "None"),
                            at("2026-01-01T00:00:00Z"));
  CHECK_FALSE(bare.at("rows").at(0).contains("object"));
}

TEST_CASE("Table: the pod columns of kube-apiserver") {
  const Json pod = {{"metadata", {{"name", "p"}, {"creationTimestamp", "2026-01-01T00:00:00Z"}}},
                    {"spec", {{"nodeName", "n1"}, {"containers", Json::array({Json::object(), Json::object()})}}},
                    {"status",
                     {{"phase", "Running"},
                      {"containerStatuses",
                       Json::array({{{"ready", true}, {"restartCount", 2}}, {{"ready", false}, {"restartCount", 1}}})}}}};
  const Json table = toTable(api::Kind::Pod, Json::array({pod}), tableRequest("application/json;as=Table;v=v1;g=meta.k8s.io", ""),
                             at("2026-01-03T01:00:00Z"));
  const Json& cells = table.at("rows").at(0).at("cells");
  CHECK(cells.at(0) == "p");
  CHECK(cells.at(1) == "1/2");
  CHECK(cells.at(2) == "Running");
  CHECK(cells.at(3) == "3");
  CHECK(cells.at(4) == "2d1h");
  CHECK(cells.at(6) == "n1");
}

TEST_CASE("humanDuration rounds as kubectl does") {
  CHECK(humanDuration(-5) == "<invalid>");
  CHECK(humanDuration(0) == "0s");
  CHECK(humanDuration(119) == "119s");
  CHECK(humanDuration(125) == "2m5s");
  CHECK(humanDuration(600) == "10m");
  CHECK(humanDuration(3 * 3600 + 60) == "3h1m");
  CHECK(humanDuration(30 * 3600) == "30h");
  CHECK(humanDuration(50 * 3600) == "2d2h");
  CHECK(humanDuration(400 * 86400) == "400d");
  CHECK(humanDuration(3 * 365 * 86400 + 86400) == "3y1d");
}
