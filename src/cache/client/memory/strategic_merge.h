#pragma once
/// A strategic merge patch for the built-in kinds, as much of it as Tessera and its tests use:
/// RFC 7386 merge, except that lists Kubernetes declares with a patch merge key are merged element by
/// element on that key (status.conditions by type, spec.containers by name, ...), `metadata.finalizers`
/// is merged as a set, and the `$patch: delete|replace` directives are honoured. Other lists are
/// replaced. `$setElementOrder/...` and `$retainKeys` directives are accepted and ignored.
#include <nlohmann/json.hpp>

namespace tessera::cache::memory {

/// Returns `original` with `patch` applied. Never throws for well-formed JSON values.
nlohmann::json strategicMerge(const nlohmann::json& original, const nlohmann::json& patch);

}  // namespace tessera::cache::memory
