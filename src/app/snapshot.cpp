// Capturing a cluster's scheduling inputs as a scenario file (snapshot.h): listing through the
// ClusterClient seam, choosing and stripping objects, writing YAML. The anonymizer is
// snapshot_anonymize.cpp; the command (kubeconfig, HTTP client) is snapshot_command.cpp.
#include "tessera/app/snapshot.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <tuple>

#include "tessera/api/convert.h"
#include "tessera/api/objects.h"
#include "tessera/grouper/grouper.h"
#include "snapshot_internal.h"

namespace tessera::app {

namespace {

using Json = nlohmann::json;
using api::Kind;

std::string str(const Json& j, std::initializer_list<const char*> path) {
  const Json* at = &j;
  for (const char* k : path) {
    if (!at->is_object() || !at->contains(k)) return {};
    at = &(*at)[k];
  }
  return at->is_string() ? at->get<std::string>() : std::string();
}

bool finished(const Json& pod) {
  const std::string phase = str(pod, {"status", "phase"});
  return phase == "Succeeded" || phase == "Failed";
}

/// The pod names a PodGroup (any of the keys Tessera reads, not empty).
bool grouped(const Json& pod) {
  return std::any_of(std::begin(api::keys::kPodGroupKeys), std::end(api::keys::kPodGroupKeys), [&](const auto& k) {
    return !str(pod, {"metadata", k.annotation ? "annotations" : "labels", k.key}).empty();
  });
}

/// A pending pod of ours that the pod grouper would look at: its owners are worth capturing.
bool grouperReads(const Json& pod, const std::string& schedulerName) {
  return str(pod, {"spec", "schedulerName"}) == schedulerName && str(pod, {"spec", "nodeName"}).empty() &&
         !finished(pod) && !grouped(pod);
}

/// The cache's view of pods: ours in any phase, and anyone's holding a node's resources.
bool podOfInterest(const Json& pod, const std::string& schedulerName) {
  if (str(pod, {"spec", "schedulerName"}) == schedulerName) return true;
  return !str(pod, {"spec", "nodeName"}).empty() && !finished(pod);
}

/// Where a kind goes in the file: definitions before what refers to them, pods last.
int kindRank(Kind k) {
  switch (k) {
    case Kind::Namespace: return 0;
    case Kind::PriorityClass:
    case Kind::SchedulingShard: return 1;
    case Kind::Queue: return 2;
    case Kind::Topology: return 3;
    case Kind::Node: return 4;
    case Kind::PodGroup:
    case Kind::VolcanoPodGroup:
    case Kind::SchedulerPluginsPodGroup: return 6;
    case Kind::Pod: return 7;
    default: return grouper::isWorkloadKind(k) ? 5 : -1;  // -1: not captured
  }
}

using snapshot_detail::keepOnly;

/// Drops what the API server manages and what no decision reads.
void strip(Json& o, Kind kind) {
  if (o.contains("metadata") && o["metadata"].is_object()) {
    Json& m = o["metadata"];
    for (const char* k : {"uid", "resourceVersion", "generation", "managedFields", "selfLink"}) m.erase(k);
    if (m.contains("annotations") && m["annotations"].is_object()) {
      m["annotations"].erase("kubectl.kubernetes.io/last-applied-configuration");
      if (m["annotations"].empty()) m.erase("annotations");
    }
  }
  switch (kind) {
    case Kind::Pod:
      if (o.contains("status"))
        keepOnly(o["status"], {"phase", "startTime", "conditions", "reason", "message", "nominatedNodeName"});
      break;
    case Kind::SchedulingShard: o.erase("status"); break;  // the daemon's report, not an input
    case Kind::Node:
      if (o.contains("status")) keepOnly(o["status"], {"capacity", "allocatable", "conditions", "phase"});
      if (o.contains("spec") && o["spec"].is_object())
        for (const char* k : {"podCIDR", "podCIDRs", "providerID", "configSource"}) o["spec"].erase(k);
      break;
    default: break;
  }
}

std::string sortKey(const Json& o) {
  return str(o, {"metadata", "creationTimestamp"}) + '\x01' + str(o, {"metadata", "uid"}) + '\x01' +
         str(o, {"metadata", "namespace"}) + '\x01' + str(o, {"metadata", "name"});
}

// ---------------------------------------------------------------- YAML

bool plainKey(const std::string& k) {
  if (k.empty() || k == "true" || k == "false" || k == "null" || k == "y" || k == "n" || k == "yes" || k == "no" ||
      k == "on" || k == "off" || k == "~")
    return false;
  if (!(std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_')) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '/';
  });
}

std::string key(const std::string& k) { return plainKey(k) ? k : Json(k).dump(); }

std::string scalar(const Json& v) {
  if (v.is_object()) return "{}";
  if (v.is_array()) return "[]";
  // JSON's escapes are YAML's double-quoted escapes; numbers, booleans and null read the same.
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool leaf(const Json& v) { return !(v.is_object() || v.is_array()) || v.empty(); }

/// Keys of a manifest and of the scenario in their usual order; others alphabetically after.
std::vector<std::string> orderedKeys(const Json& map) {
  static const char* const kFirst[] = {"name", "namespace", "description", "source", "clock",   "config", "apiVersion",
                                       "kind", "metadata",  "spec",        "status", "objects", "steps"};
  std::vector<std::string> keys;
  for (const char* k : kFirst)
    if (map.contains(k)) keys.emplace_back(k);
  for (const auto& [k, v] : map.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

void writeYaml(std::ostream& out, const Json& v, int indent, bool inlineFirst);

void writeMap(std::ostream& out, const Json& map, int indent, bool inlineFirst) {
  bool first = true;
  for (const auto& k : orderedKeys(map)) {
    if (!(first && inlineFirst)) out << std::string(static_cast<size_t>(indent), ' ');
    first = false;
    const Json& v = map[k];
    out << key(k) << ":";
    if (leaf(v)) {
      out << " " << scalar(v) << "\n";
    } else {
      out << "\n";
      writeYaml(out, v, indent + 2, false);
    }
  }
}

void writeYaml(std::ostream& out, const Json& v, int indent, bool inlineFirst) {
  if (leaf(v)) {
    out << scalar(v) << "\n";
    return;
  }
  if (v.is_object()) return writeMap(out, v, indent, inlineFirst);
  for (const auto& item : v) {
    out << std::string(static_cast<size_t>(indent), ' ') << "-";
    if (leaf(item)) {
      out << " " << scalar(item) << "\n";
    } else if (item.is_object()) {
      out << " ";
      writeMap(out, item, indent + 2, true);
    } else {
      out << "\n";
      writeYaml(out, item, indent + 2, false);
    }
  }
}

}  // namespace

std::string toYaml(const Json& value) {
  std::ostringstream out;
  writeYaml(out, value, 0, false);
  return out.str();
}

Json buildScenario(const std::vector<Json>& objects, const SnapshotOptions& options) {
  // Choose.
  std::vector<std::pair<Kind, Json>> chosen;
  std::set<std::string> namespaces;
  for (const auto& o : objects) {
    auto kind = api::kindOf(o);
    if (!kind.ok() || kindRank(*kind) < 0 || *kind == Kind::Namespace) continue;
    if (*kind == Kind::Pod && !podOfInterest(o, options.schedulerName)) continue;
    if (const std::string ns = str(o, {"metadata", "namespace"}); !ns.empty()) namespaces.insert(ns);
    chosen.emplace_back(*kind, o);
  }
  for (const auto& o : objects) {
    auto kind = api::kindOf(o);
    if (kind.ok() && *kind == Kind::Namespace && namespaces.count(str(o, {"metadata", "name"})))
      chosen.emplace_back(*kind, o);
  }
  // Order: by kind, then as the live cluster breaks ties (creation time, then UID).
  std::stable_sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) {
    const int ra = kindRank(a.first), rb = kindRank(b.first);
    if (ra != rb) return ra < rb;
    if (a.first != b.first) return a.first < b.first;
    return sortKey(a.second) < sortKey(b.second);
  });
  // Strip, count, anonymize.
  std::vector<Json> out;
  size_t nodes = 0, pods = 0, pending = 0;
  for (auto& [kind, o] : chosen) {
    strip(o, kind);
    if (kind == Kind::Node) ++nodes;
    if (kind == Kind::Pod) {
      ++pods;
      if (str(o, {"spec", "nodeName"}).empty() && !finished(o)) ++pending;
    }
    out.push_back(std::move(o));
  }
  if (options.anonymize) out = anonymizeObjects(out);

  Json doc = Json::object();
  doc["name"] = "snapshot";
  doc["description"] = "A live cluster's scheduling inputs" + std::string(options.anonymize ? " (anonymized)" : "") +
                       ": " + std::to_string(nodes) + " nodes, " + std::to_string(pods) + " pods (" +
                       std::to_string(pending) +
                       " pending). Replay it with tessera simulate; add steps and "
                       "expectations to ask what would happen if.";
  if (!options.anonymize && !options.source.empty()) doc["source"] = options.source;
  doc["clock"] = api::formatTime(options.capturedAt);
  Json config = options.config.is_object() ? options.config : Json::object();
  if (options.schedulerName != api::keys::kDefaultSchedulerName || config.contains("schedulerName"))
    config["schedulerName"] = options.schedulerName;
  if (!config.empty()) doc["config"] = std::move(config);
  doc["objects"] = std::move(out);
  doc["steps"] = Json::array({Json{{"cycles", 1}}});
  return doc;
}

api::Result<Json> captureScenario(cache::ClusterClient& client, const SnapshotOptions& options) {
  std::vector<Json> objects;
  auto listAll = [&](Kind kind) -> api::Status {
    cache::ListOptions lo;
    lo.limit = 500;
    for (;;) {
      auto page = client.list(kind, lo);
      if (!page.ok()) {
        if (page.error().code == 404) return api::Status::success();  // a CRD not installed
        return api::makeError("listing " + std::string(api::kindInfo(kind).plural) + ": " + page.error().message,
                              page.error().code);
      }
      const api::KindInfo& info = api::kindInfo(kind);
      for (auto& item : page->items) {
        // Items of a list carry no apiVersion / kind: the list's.
        if (item.is_object()) {
          item["apiVersion"] = info.apiVersion();
          item["kind"] = std::string(info.name);
        }
        objects.push_back(std::move(item));
      }
      if (page->continueToken.empty()) return api::Status::success();
      lo.continueToken = page->continueToken;
    }
  };
  for (Kind k : {Kind::PriorityClass, Kind::Queue, Kind::Topology, Kind::Node, Kind::VolcanoPodGroup,
                 Kind::SchedulerPluginsPodGroup, Kind::PodGroup, Kind::Pod})
    TESSERA_TRY(listAll(k));
  // A sharded daemon's config names its SchedulingShard (config.shard): the replay needs them all
  // (one pool, one shard is checked against the others). Clusters without the CRD have none.
  if (options.config.is_object() && options.config.value("shard", std::string()) != "")
    (void)listAll(Kind::SchedulingShard);
  // The owners the pod grouper would read (bottom up), for pending pods it would group.
  std::set<std::tuple<Kind, std::string, std::string>> fetched;
  std::vector<Json> queue;
  for (const auto& o : objects)
    if (api::kindOf(o).ok() && *api::kindOf(o) == Kind::Pod && grouperReads(o, options.schedulerName))
      queue.push_back(o);
  while (!queue.empty()) {
    const Json o = std::move(queue.back());
    queue.pop_back();
    const Json* refs = o.contains("metadata") && o["metadata"].is_object() && o["metadata"].contains("ownerReferences")
                           ? &o["metadata"]["ownerReferences"]
                           : nullptr;
    if (!refs || !refs->is_array()) continue;
    for (const auto& ref : *refs) {
      if (!ref.is_object()) continue;
      auto kind = api::kindFromApiVersion(ref.value("apiVersion", ""), ref.value("kind", ""));
      if (!kind || !grouper::isWorkloadKind(*kind)) continue;
      const std::string ns = str(o, {"metadata", "namespace"}), name = ref.value("name", "");
      if (!fetched.insert({*kind, ns, name}).second) continue;
      auto got = client.get(*kind, ns, name);
      if (!got.ok()) continue;  // gone, or the CRD is not served: the grouper would not find it either
      Json w = std::move(got).value();
      const api::KindInfo& info = api::kindInfo(*kind);
      w["apiVersion"] = info.apiVersion();
      w["kind"] = std::string(info.name);
      queue.push_back(w);
      objects.push_back(std::move(w));
    }
  }
  // The namespaces in use, one get each (what the pod grouper does, and all the daemon's RBAC
  // allows on namespaces); one the server will not show is left out.
  std::set<std::string> namespaces;
  for (const auto& o : objects)
    if (const std::string ns = str(o, {"metadata", "namespace"}); !ns.empty()) namespaces.insert(ns);
  for (const auto& ns : namespaces) {
    auto got = client.get(Kind::Namespace, "", ns);
    if (!got.ok()) continue;
    Json n = std::move(got).value();
    n["apiVersion"] = "v1";
    n["kind"] = "Namespace";
    objects.push_back(std::move(n));
  }
  return buildScenario(objects, options);
}

}  // namespace tessera::app
