#include "tessera/cache/cluster_client.h"

namespace tessera::cache {

api::Result<std::unique_ptr<WatchHandle>> ClusterClient::watchSelected(api::Kind kind, const std::string& resourceVersion,
                                                                       const ListOptions& selectors,
                                                                       WatchCallback callback) {
  if (selectors.labelSelector.empty() && selectors.fieldSelector.empty() && selectors.namespace_.empty())
    return watch(kind, resourceVersion, std::move(callback));
  return api::makeError("this client cannot watch with selectors", 400);
}

}  // namespace tessera::cache
