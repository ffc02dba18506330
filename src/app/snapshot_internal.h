#pragma once
// What snapshot.cpp (capture) and snapshot_anonymize.cpp share. Private to tessera_app.
#include <initializer_list>
#include <utility>

#include <nlohmann/json.hpp>

namespace tessera::app::snapshot_detail {

/// Keeps only `keys` of the object `j` (anything else than an object is left as it is).
inline void keepOnly(nlohmann::json& j, std::initializer_list<const char*> keys) {
  if (!j.is_object()) return;
  nlohmann::json kept = nlohmann::json::object();
  for (const char* k : keys)
    if (j.contains(k)) kept[k] = j[k];
  j = std::move(kept);
}

}  // namespace tessera::app::snapshot_detail
