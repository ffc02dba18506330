#pragma once
/// What the binder, the GPU binding and the status writer share: core/v1 Event objects and
/// "ns/name" keys.
#include <string>
#include <utility>

#include "tessera/api/clock.h"
#include "tessera/api/kinds.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::binder {

/// Splits "ns/name" (a key without '/' is a name without namespace).
std::pair<std::string, std::string> splitKey(const std::string& key);

/// A core/v1 Event about an object (count 1, first = last = now). Its name is the object's name
/// plus a suffix unique across restarts of the process (time and a process-wide counter).
cache::Json makeEvent(api::Kind kind, const std::string& ns, const std::string& name, const std::string& uid,
                      const std::string& type, const std::string& reason, const std::string& message,
                      const std::string& component, api::Time now);

}  // namespace tessera::binder
