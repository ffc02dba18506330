#include <catch2/catch.hpp>

#include "tessera/api/kinds.h"

using namespace tessera::api;

TEST_CASE("kinds: table", "[kinds]") {
  for (Kind k : kAllKinds) CHECK(kindInfo(k).kind == k);
  CHECK(kindInfo(Kind::Pod).apiVersion() == "v1");
  CHECK(kindInfo(Kind::Pod).plural == "pods");
  CHECK(kindInfo(Kind::Pod).namespaced);
  CHECK_FALSE(kindInfo(Kind::Node).namespaced);
  CHECK_FALSE(kindInfo(Kind::Namespace).namespaced);
  CHECK(kindInfo(Kind::PodGroup).apiVersion() == "scheduling.tessera.dev/v1alpha1");
  CHECK(kindInfo(Kind::PodGroup).namespaced);
  CHECK_FALSE(kindInfo(Kind::Queue).namespaced);
  CHECK(kindInfo(Kind::Topology).plural == "topologies");
  CHECK_FALSE(kindInfo(Kind::Topology).namespaced);
  CHECK(kindInfo(Kind::PriorityClass).apiVersion() == "scheduling.k8s.io/v1");
  CHECK(kindInfo(Kind::PriorityClass).plural == "priorityclasses");
  CHECK_FALSE(kindInfo(Kind::PriorityClass).namespaced);
  CHECK(kindInfo(Kind::Lease).apiVersion() == "coordination.k8s.io/v1");
  CHECK(kindInfo(Kind::Lease).namespaced);
  CHECK(kindInfo(Kind::ConfigMap).plural == "configmaps");
  CHECK(kindInfo(Kind::Event).plural == "events");
}

TEST_CASE("kinds: lookups", "[kinds]") {
  CHECK(kindFromApiVersion("v1", "Pod") == Kind::Pod);
  CHECK(kindFromApiVersion("scheduling.tessera.dev/v1alpha1", "Queue") == Kind::Queue);
  CHECK(kindFromApiVersion("scheduling.k8s.io/v1", "PriorityClass") == Kind::PriorityClass);
  CHECK(kindFromApiVersion("coordination.k8s.io/v1", "Lease") == Kind::Lease);
  CHECK_FALSE(kindFromApiVersion("v1", "Queue").has_value());
  CHECK_FALSE(kindFromApiVersion("apps/v1", "Pod").has_value());
  CHECK_FALSE(kindFromApiVersion("v2", "Pod").has_value());
  CHECK_FALSE(kindFromApiVersion("", "Pod").has_value());
  CHECK_FALSE(kindFromApiVersion("v1", "pod").has_value());
  CHECK(kindFromName("Topology") == Kind::Topology);
  CHECK_FALSE(kindFromName("Deployment").has_value());
}
