#pragma once
// The meta.k8s.io Table answer kubectl asks for (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`):
// the columns a real API server prints for the built-in kinds, and each CRD's additionalPrinterColumns
// (from deploy/crds, see discovery.h) for ours.
#include <string>
#include <string_view>
#include <vector>

#include "discovery.h"
#include "tessera/api/clock.h"
#include "tessera/api/kinds.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache::http {

/// What the Accept header asked for. `tableVersion` empty: the object itself.
struct TableRequest {
  std::string tableVersion;  ///< "v1" or "v1beta1"
  std::string includeObject = "Metadata";  ///< None, Metadata, Object (query includeObject)
};
/// Reads the Accept header and the includeObject query value.
TableRequest tableRequest(std::string_view accept, std::string_view includeObject);

/// A Table of `items` (objects of `kind`); `now` ages the AGE-like cells. `resourceVersion` and
/// `continueToken` are copied into the list metadata.
Json toTable(api::Kind kind, const Json& items, const TableRequest& request, api::Time now,
             const std::string& resourceVersion = {}, const std::string& continueToken = {});

/// A Table for a kind a CRD defined at run time: NAME, then `columns` (the CRD's
/// additionalPrinterColumns), or NAME and AGE when it has none, as a real server prints CRDs.
Json toTable(const std::vector<PrinterColumn>& columns, const Json& items, const TableRequest& request, api::Time now,
             const std::string& resourceVersion = {}, const std::string& continueToken = {});

/// "5m3s", "2d4h", as kubectl shows durations.
std::string humanDuration(int64_t seconds);

}  // namespace tessera::cache::http
