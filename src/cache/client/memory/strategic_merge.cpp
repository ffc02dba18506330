#include "strategic_merge.h"

#include <string>
#include <string_view>

namespace tessera::cache::memory {

namespace {

using Json = nlohmann::json;

/// The patch merge keys of the lists of the built-in kinds Tessera writes (Pod, Node, ConfigMap,
/// Event), by field name. The field names are unambiguous across those kinds.
const char* mergeKeyOf(std::string_view field) {
  if (field == "conditions" || field == "addresses") return "type";
  if (field == "containers" || field == "initContainers" || field == "ephemeralContainers" || field == "volumes" ||
      field == "env" || field == "imagePullSecrets" || field == "resourceClaims" || field == "containerStatuses" ||
      field == "initContainerStatuses") {
    return "name";
  }
  if (field == "volumeMounts") return "mountPath";
  if (field == "ports") return "containerPort";
  if (field == "ownerReferences") return "uid";
  if (field == "hostAliases") return "ip";
  return nullptr;
}

bool isSetList(std::string_view field) { return field == "finalizers"; }

Json mergeObject(const Json& original, const Json& patch);

Json stripDirectives(const Json& element) { return mergeObject(Json::object(), element); }

Json mergeKeyedList(const Json& original, const Json& patch, const char* key) {
  Json result = original;
  for (const Json& element : patch) {
    if (!element.is_object() || !element.contains(key)) {
      result.push_back(element);
      continue;
    }
    const Json& id = element[key];
    auto found = result.end();
    for (auto it = result.begin(); it != result.end(); ++it) {
      if (it->is_object() && it->contains(key) && (*it)[key] == id) {
        found = it;
        break;
      }
    }
    auto directive = element.find("$patch");
    if (directive != element.end() && *directive == "delete") {
      if (found != result.end()) result.erase(found);
    } else if (directive != element.end() && *directive == "replace") {
      Json replacement = element;
      replacement.erase("$patch");
      if (found != result.end()) {
        *found = replacement;
      } else {
        result.push_back(replacement);
      }
    } else if (found != result.end()) {
      *found = mergeObject(*found, element);
    } else {
      result.push_back(stripDirectives(element));
    }
  }
  return result;
}

Json mergeSetList(const Json& original, const Json& patch) {
  Json result = original;
  for (const Json& v : patch) {
    bool present = false;
    for (const Json& o : result) present = present || o == v;
    if (!present) result.push_back(v);
  }
  return result;
}

Json mergeObject(const Json& original, const Json& patch) {
  if (!patch.is_object()) return patch;
  auto directive = patch.find("$patch");
  if (directive != patch.end() && *directive == "replace") {
    Json replacement = patch;
    replacement.erase("$patch");
    return replacement;
  }
  Json result = original.is_object() ? original : Json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/")) continue;
    if (k.starts_with("$deleteFromPrimitiveList/")) {
      std::string target = k.substr(std::string_view("$deleteFromPrimitiveList/").size());
      auto list = result.find(target);
      if (list != result.end() && list->is_array() && v.is_array()) {
        Json kept = Json::array();
        for (const Json& e : *list) {
          bool drop = false;
          for (const Json& d : v) drop = drop || d == e;
          if (!drop) kept.push_back(e);
        }
        *list = std::move(kept);
      }
      continue;
    }
    if (v.is_null()) {
      result.erase(k);
      continue;
    }
    auto cur = result.find(k);
    bool haveList = cur != result.end() && cur->is_array();
    if (v.is_array()) {
      const char* key = mergeKeyOf(k);
      if (key != nullptr && haveList) {
        result[k] = mergeKeyedList(*cur, v, key);
      } else if (isSetList(k) && haveList) {
        result[k] = mergeSetList(*cur, v);
      } else {
        Json list = Json::array();
        for (const Json& e : v) list.push_back(e.is_object() ? stripDirectives(e) : e);
        result[k] = std::move(list);
      }
    } else if (v.is_object()) {
      if (v.contains("$patch") && v["$patch"] == "delete") {
        result.erase(k);
      } else {
        result[k] = mergeObject(cur != result.end() ? *cur : Json(), v);
      }
    } else {
      result[k] = v;
    }
  }
  return result;
}

}  // namespace

Json strategicMerge(const Json& original, const Json& patch) { return mergeObject(original, patch); }

}  // namespace tessera::cache::memory
