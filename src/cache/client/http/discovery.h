#pragma once
// What the test API server tells kubectl about itself: /version, API discovery (/api, /apis, /api/v1,
// /apis/GROUP/VERSION with verbs, short names, categories), OpenAPI v3 documents, and per kind the
// columns of the Table answer. CRD-defined facts (short names, categories, printer columns,
// openAPIV3Schema) are read from deploy/crds, embedded at build time (embed_crds.cmake).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/api/kinds.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache::http {

struct EmbeddedFile {
  const char* name;
  const char* text;
};
/// The CRD manifests of deploy/crds, as built in (generated source).
const std::vector<EmbeddedFile>& embeddedCrds();

/// A column of a kind's Table: a CRD's additionalPrinterColumns entry (jsonPath set), or a built-in
/// column computed in table.cpp (jsonPath empty).
struct PrinterColumn {
  std::string name, type, format, description, jsonPath;
  int priority = 0;
};

/// Everything discovery says about one kind.
struct ResourceFacts {
  api::Kind kind;
  std::vector<std::string> shortNames, categories;
  std::vector<PrinterColumn> printerColumns;  ///< from the CRD; empty for built-in kinds
  bool statusSubresource = false;
  Json schema;  ///< the CRD's openAPIV3Schema; null for built-in kinds
};
const ResourceFacts& resourceFacts(api::Kind kind);
/// Whether a real cluster serves the kind through a CRD (a group with a dot, not *.k8s.io): such
/// kinds take merge and JSON patches only, not strategic merge.
bool isCustomResource(api::Kind kind);

/// The answer to a GET of a discovery or OpenAPI path ("/version", "/api", "/apis", "/api/v1",
/// "/apis/batch/v1", "/openapi/v3", "/openapi/v3/apis/batch/v1"); nullopt when `path` is none of
/// them (then it is a resource path, or 404).
std::optional<Json> discoveryDocument(std::string_view path);

}  // namespace tessera::cache::http
