// Unknown fields as a real API server reports them (fieldValidation=Strict|Warn): every kind's
// envelope and ObjectMeta, Pods and Nodes by hand, Tessera's CRDs by their openAPIV3Schema.
#include <catch2/catch.hpp>

#include "tessera/cache/field_validation.h"

namespace {

using tessera::api::Kind;
using tessera::cache::Json;
using tessera::cache::unknownFields;
using Paths = std::vector<std::string>;

}  // namespace

TEST_CASE("unknownFields: the envelope and ObjectMeta of every kind", "[fieldvalidation]") {
  CHECK(unknownFields(Kind::Namespace, Json::parse(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a",
        "labels":{"x":"y"},"annotations":{},"uid":"u","resourceVersion":"1","ownerReferences":[],"finalizers":[]}})"))
            .empty());
  CHECK(unknownFields(Kind::Node, Json::parse(R"({"kind":"Node","metadata":{"name":"n","spec":{}},"sepc":{}})")) ==
        Paths{"sepc", "metadata.spec"});
  // A kind's own top-level fields.
  CHECK(unknownFields(Kind::ConfigMap, Json::parse(R"({"kind":"ConfigMap","metadata":{"name":"c"},"data":{},
        "binaryData":{},"immutable":true})")).empty());
  CHECK(unknownFields(Kind::ConfigMap, Json::parse(R"({"kind":"ConfigMap","metadata":{"name":"c"},"spec":{}})")) ==
        Paths{"spec"});
  CHECK(unknownFields(Kind::PriorityClass, Json::parse(R"({"metadata":{"name":"p"},"value":5,"globalDefault":false,
        "preemptionPolicy":"Never","description":"d"})")).empty());
  // Not a map: the converter's error, not an unknown field.
  CHECK(unknownFields(Kind::Pod, Json::parse(R"({"metadata":"x","spec":[1]})")).empty());
}

TEST_CASE("unknownFields: a Pod's spec, containers and resources; a Node's spec and status", "[fieldvalidation]") {
  const Json pod = Json::parse(R"({"kind":"Pod","metadata":{"name":"p"},
      "spec":{"schedulerName":"tessera","nodeSelector":{},"tolerations":[],"priorityClassName":"x","schedulername":"y",
        "initContainers":[{"name":"i","image":"b","resources":{"requests":{"cpu":"1"}}}],
        "containers":[{"name":"c","image":"b","resources":{"requests":{},"limits":{}}},
                      {"name":"d","image":"b","limits":{"cpu":"1"},"resources":{"request":{}}}]},
      "status":{"phase":"Running","anything":1}})");
  CHECK(unknownFields(Kind::Pod, pod) ==
        Paths{"spec.schedulername", "spec.containers[1].limits", "spec.containers[1].resources.request"});
  const Json node = Json::parse(R"({"kind":"Node","metadata":{"name":"n"},"spec":{"unschedulable":true,"taint":[]},
      "status":{"allocatable":{},"capacity":{},"conditions":[],"allocatble":{}}})");
  CHECK(unknownFields(Kind::Node, node) == Paths{"spec.taint", "status.allocatble"});
}

TEST_CASE("unknownFields: Tessera's CRDs by their schema", "[fieldvalidation]") {
  const Json queue = Json::parse(R"({"apiVersion":"scheduling.tessera.dev/v1alpha1","kind":"Queue","metadata":{"name":"q"},
      "spec":{"parentQueue":"p","resources":{"gpu":{"quota":"1","limit":"2","overQuotaWeight":"1"},
                                             "cpu":{"quota":"1","limt":"2"}},"prority":1}})");
  CHECK(unknownFields(Kind::Queue, queue) == Paths{"spec.prority", "spec.resources.cpu.limt"});
  const Json pg = Json::parse(R"({"kind":"PodGroup","metadata":{"name":"g","namespace":"a"},
      "spec":{"minMember":2,"queue":"q","subGroups":[{"name":"s","minMember":1,"minmember":1}]}})");
  CHECK(unknownFields(Kind::PodGroup, pg) == Paths{"spec.subGroups[0].minmember"});
  // Another scheduler's CRD: no schema here, only the envelope is checked.
  CHECK(unknownFields(Kind::VolcanoPodGroup, Json::parse(R"({"metadata":{"name":"v"},"spec":{"anything":1}})")).empty());
}
