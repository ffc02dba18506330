#pragma once
/// Unknown fields in a manifest, as a real API server finds them for `fieldValidation=Strict|Warn`:
/// the test API server answers with them (400 or a Warning header), and scenario files are read
/// strictly with them (a `spec:` indented under `metadata:` is an error, not silently ignored).
#include <string>
#include <vector>

#include "tessera/api/kinds.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache {

/// Paths of the fields of `obj` (a manifest of `kind`) that the API server does not know, in
/// document order: "metadata.spec", "spec.containers[0].resource", ".spec.quota" style without the
/// leading dot. What is checked: the envelope (apiVersion, kind, metadata and the kind's own
/// top-level fields) and ObjectMeta for every kind; a Pod's spec, its containers and their
/// resources; a Node's spec and status; Tessera's CRDs (Queue, PodGroup, Topology) throughout, by
/// their openAPIV3Schema. Other parts (a Pod's status, other schedulers' CRDs, workload specs) are
/// not checked: the test API server has no schema for them.
std::vector<std::string> unknownFields(api::Kind kind, const Json& obj);

/// The same for an object of a kind a CRD defines at run time: the envelope and ObjectMeta, and the
/// rest (every top-level field besides apiVersion, kind and metadata) by the CRD's openAPIV3Schema
/// `schema`; nothing beyond the envelope when `schema` is not an object.
std::vector<std::string> unknownFields(const Json& schema, const Json& obj);

}  // namespace tessera::cache
