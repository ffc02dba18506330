// Scenario expectations (../shared/scenarios/SCHEMA.md, "expect"): one table of {key, handler}.
// A handler reads the cluster's objects (and the runner's observations), adds a failure line for
// each unmet expectation, and returns an error only when the expectation itself is malformed.
#include <algorithm>
#include <cctype>
#include <sstream>

#include "scenario_internal.h"
#include "tessera/api/objects.h"
#include "tessera/api/quantity.h"

namespace tessera::app::scenario {

namespace {

using api::Kind;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string nodeOf(const Json& p) {
  if (p.is_null() || !p.contains("spec")) return "";
  return p["spec"].value("nodeName", "");
}

bool boundAndLive(const Json& p) {
  if (nodeOf(p).empty()) return false;
  const std::string phase = p.contains("status") ? p["status"].value("phase", "") : "";
  return phase != "Succeeded" && phase != "Failed";
}

api::Result<std::vector<std::string>> stringsOf(const Json& v, const std::string& where) {
  if (!v.is_array()) return malformed(where, "must be a list");
  std::vector<std::string> out;
  for (const auto& x : v) {
    if (!x.is_string()) return malformed(where, "entries must be strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}

std::vector<std::string> splitRef(const std::string& ref) {
  std::vector<std::string> parts;
  std::stringstream ss(ref);
  for (std::string p; std::getline(ss, p, '/');) parts.push_back(p);
  return parts;
}

/// The checks of one `expect` map against what was observed.
class Checker {
 public:
  Checker(const Observed& observed, ScenarioOutcome& outcome) : seen_(observed), outcome_(outcome) {}

  api::Status bound(const Json& v, const std::string& w) {
    if (!v.is_object()) return malformed(w, "must be a map of pod -> node");
    for (const auto& [ref, nodeJ] : v.items()) {
      if (!nodeJ.is_string()) return malformed(w, ref + ": node must be a string");
      const std::string want = nodeJ.get<std::string>();
      Json p = pod(ref);
      if (p.is_null()) {
        unmet(w, ref, "bound to " + want, "no such pod");
        continue;
      }
      const std::string node = nodeOf(p);
      if (node.empty()) unmet(w, ref, "bound to " + want, "not bound" + reasonSuffix(ref));
      else if (want != "*" && node != want) unmet(w, ref, "bound to " + want, "bound to " + node);
    }
    return api::Status::success();
  }

  api::Status pending(const Json& v, const std::string& w) {
    TESSERA_ASSIGN_OR_RETURN(const auto refs, stringsOf(v, w));
    for (const auto& ref : refs) {
      Json p = pod(ref);
      if (p.is_null()) unmet(w, ref, "pending", "no such pod");
      else if (!nodeOf(p).empty()) unmet(w, ref, "pending", "bound to " + nodeOf(p));
    }
    return api::Status::success();
  }

  api::Status evicted(const Json& v, const std::string& w, bool want) {
    TESSERA_ASSIGN_OR_RETURN(const auto refs, stringsOf(v, w));
    for (const auto& ref : refs) {
      const bool was = seen_.evicted.count(ref) > 0;
      if (was != want) unmet(w, ref, want ? "evicted" : "never evicted", was ? "evicted" : "never evicted");
    }
    return api::Status::success();
  }

  api::Status boundCount(const Json& v, const std::string& w) {
    if (!v.is_object()) return malformed(w, "must be a map of label selector -> count");
    for (const auto& [sel, n] : v.items()) {
      if (!n.is_number_integer()) return malformed(w, sel + ": count must be an integer");
      cache::ListOptions opts;
      opts.labelSelector = sel;
      auto pods = seen_.cluster.list(Kind::Pod, opts);
      if (!pods.ok()) return malformed(w, sel + ": " + pods.error().message);
      int64_t count = 0;
      for (const auto& p : pods->items) count += boundAndLive(p) ? 1 : 0;
      if (count != n.get<int64_t>())
        unmet(w, sel, std::to_string(n.get<int64_t>()) + " bound", std::to_string(count) + " bound");
    }
    return api::Status::success();
  }

  api::Status nodes(const Json& v, const std::string& w, bool same) {
    if (!v.is_array()) return malformed(w, "must be a list of lists of pods");
    for (const auto& group : v) {
      TESSERA_ASSIGN_OR_RETURN(const auto refs, stringsOf(group, w));
      std::map<std::string, std::string> nodes;
      std::string desc;
      for (const auto& ref : refs) {
        nodes[ref] = nodeOf(pod(ref));
        desc += (desc.empty() ? "" : ", ") + ref + "@" + (nodes[ref].empty() ? "unbound" : nodes[ref]);
      }
      bool ok = true;
      std::set<std::string> distinct;
      for (const auto& [ref, n] : nodes) {
        if (n.empty()) ok = false;
        distinct.insert(n);
      }
      if (same) ok = ok && distinct.size() == 1;
      else ok = ok && distinct.size() == nodes.size();
      if (!ok) unmet(w, "[" + desc + "]", same ? "all on one node" : "pairwise on different nodes", desc);
    }
    return api::Status::success();
  }

  api::Status gpus(const Json& v, const std::string& w, bool same) {
    if (!v.is_array()) return malformed(w, "must be a list of lists of pods");
    for (const auto& group : v) {
      TESSERA_ASSIGN_OR_RETURN(const auto refs, stringsOf(group, w));
      std::set<std::string> distinct;
      std::string desc;
      bool ok = true;
      for (const auto& ref : refs) {
        const std::string g = gpuGroupOf(ref);
        if (g.empty()) ok = false;
        distinct.insert(g);
        desc += (desc.empty() ? "" : ", ") + ref + "@" + (g.empty() ? "no GPU group" : g);
      }
      ok = ok && (same ? distinct.size() == 1 : distinct.size() == refs.size());
      if (!ok) unmet(w, "[" + desc + "]", same ? "one shared GPU" : "different GPUs", desc);
    }
    return api::Status::success();
  }

  api::Status reservationPods(const Json& v, const std::string& w) {
    if (!v.is_number_integer()) return malformed(w, "must be an integer");
    cache::ListOptions opts;
    opts.namespace_ = api::keys::kReservationNamespace;
    auto pods = seen_.cluster.list(Kind::Pod, opts);
    int64_t n = 0;
    if (pods.ok())
      for (const auto& p : pods->items)
        if (!p["metadata"].contains("deletionTimestamp")) ++n;
    if (n != v.get<int64_t>()) unmet(w, "reservation pods", std::to_string(v.get<int64_t>()), std::to_string(n));
    return api::Status::success();
  }

  /// The pod's GPU ConfigMap (<pod>-tessera-gpu); the error says it is missing.
  api::Result<Json> gpuConfigMap(const std::string& ref) {
    auto [ns, name] = splitPodRef(ref);
    auto cm = seen_.cluster.get(Kind::ConfigMap, ns, name + "-tessera-gpu");
    if (!cm.ok()) return api::makeError("no GPU ConfigMap " + ns + "/" + name + "-tessera-gpu");
    return cm;
  }

  api::Status gpuMemoryLimit(const Json& v, const std::string& w) {
    if (!v.is_object()) return malformed(w, "must be a map of pod -> MiB");
    for (const auto& [ref, mib] : v.items()) {
      if (!mib.is_number_integer()) return malformed(w, ref + ": MiB must be an integer");
      auto cm = gpuConfigMap(ref);
      std::string found = cm.ok() ? "no GPU_MEMORY_LIMIT in its GPU ConfigMap" : cm.error().message;
      if (cm.ok() && cm->contains("data") && (*cm)["data"].contains("GPU_MEMORY_LIMIT")) {
        const std::string bytes = (*cm)["data"].value("GPU_MEMORY_LIMIT", "");
        try {
          const long long b = std::stoll(bytes);
          found = std::to_string(b / (1024 * 1024)) + " MiB";
          if (b == mib.get<int64_t>() * 1024 * 1024) continue;
        } catch (...) {
          found = "GPU_MEMORY_LIMIT=" + bytes;
        }
      }
      unmet(w, ref, std::to_string(mib.get<int64_t>()) + " MiB", found);
    }
    return api::Status::success();
  }

  /// NVIDIA_VISIBLE_DEVICES of the pod's GPU ConfigMap: the UUIDs of the GPUs it was given.
  api::Status gpuUuid(const Json& v, const std::string& w) {
    if (!v.is_object()) return malformed(w, "must be a map of pod -> GPU UUIDs (comma list)");
    for (const auto& [ref, want] : v.items()) {
      if (!want.is_string()) return malformed(w, ref + ": must be a string (GPU-..., comma list for several)");
      auto cm = gpuConfigMap(ref);
      const std::string found = !cm.ok()                ? cm.error().message
                                : cm->contains("data") ? (*cm)["data"].value("NVIDIA_VISIBLE_DEVICES", "")
                                                       : "";
      if (found != want.get<std::string>()) unmet(w, ref, want.get<std::string>(), found.empty() ? "none" : found);
    }
    return api::Status::success();
  }

  /// GPU_CORE_LIMIT of the pod's GPU ConfigMap (0: none written).
  api::Status gpuCoreLimit(const Json& v, const std::string& w) {
    if (!v.is_object()) return malformed(w, "must be a map of pod -> percent");
    for (const auto& [ref, percent] : v.items()) {
      if (!percent.is_number_integer()) return malformed(w, ref + ": percent must be an integer");
      auto cm = gpuConfigMap(ref);
      if (!cm.ok()) {
        unmet(w, ref, std::to_string(percent.get<int64_t>()) + "%", cm.error().message);
        continue;
      }
      const std::string found = cm->contains("data") ? (*cm)["data"].value("GPU_CORE_LIMIT", "0") : "0";
      if (found != std::to_string(percent.get<int64_t>()))
        unmet(w, ref, std::to_string(percent.get<int64_t>()) + "%", "GPU_CORE_LIMIT " + found);
    }
    return api::Status::success();
  }

  api::Status queueAllocated(const Json& v, const std::string& w) {
    if (!v.is_object()) return malformed(w, "must be a map of queue -> resources");
    auto snap = seen_.cache.snapshot();
    // A parent's amount includes its children's.
    std::map<std::string, std::string> parent;
    for (const auto& [name, q] : snap->queues)
      if (q->queue) parent[name] = q->queue->parentQueue;
    std::map<std::string, api::Resources> total;
    for (const auto& [name, q] : snap->queues) {
      std::set<std::string> visited;
      for (std::string cur = name; !cur.empty() && visited.insert(cur).second;) {
        total[cur] += q->allocated;
        auto it = parent.find(cur);
        cur = it == parent.end() ? "" : it->second;
      }
    }
    for (const auto& [queue, res] : v.items()) {
      if (!res.is_object()) return malformed(w, queue + ": must be a map of resource -> amount");
      for (const auto& [rname, amount] : res.items()) {
        std::string full = rname == "gpu" ? std::string(api::kResourceGpu) : rname;
        std::string text = amount.is_string() ? amount.get<std::string>() : amount.dump();
        auto want = api::parseResourceAmount(full, text);
        if (!want.ok()) return malformed(w, queue + "." + rname + ": " + want.error().message);
        const int64_t have = total[queue].get(full);
        if (have != *want) unmet(w, queue + " " + rname, text, api::formatResourceAmount(full, have));
      }
    }
    return api::Status::success();
  }

  api::Status reason(const Json& v, const std::string& w) {
    if (!v.is_object()) return malformed(w, "must be a map of reference -> substring");
    for (const auto& [ref, subJ] : v.items()) {
      if (!subJ.is_string()) return malformed(w, ref + ": substring must be a string");
      const std::string sub = lower(subJ.get<std::string>());
      std::vector<std::string> messages;
      const std::vector<std::string> parts = splitRef(ref);
      std::vector<Json> events;
      if (parts.size() == 2 && parts[0] == "Node") {  // no namespace is "Node" (DNS labels are lower case)
        events = eventsFor("Node", "", parts[1]);
      } else if (parts.size() == 2 && parts[0] != "Queue") {
        messages.push_back(latestPodMessage(ref));
        events = eventsFor("Pod", parts[0], parts[1]);
      } else if (parts.size() == 2) {
        events = eventsFor("Queue", "", parts[1]);
        conditionMessages(seen_.cluster.get(Kind::Queue, "", parts[1]), messages);
      } else if (parts.size() == 3 && parts[0] == "PodGroup") {
        events = eventsFor("PodGroup", parts[1], parts[2]);
        conditionMessages(seen_.cluster.get(Kind::PodGroup, parts[1], parts[2]), messages);
      } else {
        return malformed(w, "bad reference \"" + ref + "\" (ns/pod, Queue/name, Node/name or PodGroup/ns/name)");
      }
      // The latest scheduling event (a Warning) counts, as does the current condition.
      for (auto it = events.rbegin(); it != events.rend(); ++it)
        if (it->value("type", "") == "Warning") {
          messages.push_back(it->value("message", ""));
          break;
        }
      bool ok = std::any_of(messages.begin(), messages.end(),
                            [&](const std::string& m) { return lower(m).find(sub) != std::string::npos; });
      if (!ok) {
        std::string found;
        for (const auto& m : messages)
          if (!m.empty()) found += (found.empty() ? "" : " | ") + ("\"" + m + "\"");
        unmet(w, ref, "a reason containing \"" + subJ.get<std::string>() + "\"", found.empty() ? "no reason" : found);
      }
    }
    return api::Status::success();
  }

  api::Status pipelined(const Json& v, const std::string& w) {
    if (!v.is_object()) return malformed(w, "must be a map of pod -> node");
    for (const auto& [ref, nodeJ] : v.items()) {
      if (!nodeJ.is_string()) return malformed(w, ref + ": node must be a string");
      const std::string want = nodeJ.get<std::string>();
      Json p = pod(ref);
      if (!nodeOf(p).empty()) {
        unmet(w, ref, "pipelined to " + want, "bound to " + nodeOf(p));
        continue;
      }
      auto it = seen_.lastPipelined.find(ref);
      if (it == seen_.lastPipelined.end())
        unmet(w, ref, "pipelined to " + want, "not pipelined in the last cycle" + reasonSuffix(ref));
      else if (want != "*" && it->second != want) unmet(w, ref, "pipelined to " + want, "pipelined to " + it->second);
    }
    return api::Status::success();
  }

 private:
  void unmet(const std::string& where, const std::string& what, const std::string& expected, const std::string& found) {
    outcome_.failures.push_back("scenario " + outcome_.name + ": " + where + ": " + what + ": expected " + expected +
                                ", found " + found);
  }

  Json pod(const std::string& ref) {
    auto [ns, name] = splitPodRef(ref);
    auto p = seen_.cluster.get(Kind::Pod, ns, name);
    return p.ok() ? *p : Json();
  }

  /// The GPU group a fractional pod belongs to: the label tessera.dev/gpu-group the binder sets.
  std::string gpuGroupOf(const std::string& ref) {
    Json p = pod(ref);
    if (p.is_null() || !p["metadata"].contains("labels")) return "";
    return p["metadata"]["labels"].value(api::keys::kGpuGroupLabel, "");
  }

  /// Events about an object, oldest first (creation order).
  std::vector<Json> eventsFor(const std::string& kind, const std::string& ns, const std::string& name) {
    std::vector<Json> out;
    auto evs = seen_.cluster.list(Kind::Event);
    if (!evs.ok()) return out;
    for (const auto& e : evs->items) {
      const Json& io = e.value("involvedObject", Json::object());
      if (io.value("kind", "") == kind && io.value("namespace", "") == ns && io.value("name", "") == name)
        out.push_back(e);
    }
    std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
      const std::string ra = a["metadata"].value("resourceVersion", ""),
                        rb = b["metadata"].value("resourceVersion", "");
      return ra.size() != rb.size() ? ra.size() < rb.size() : ra < rb;  // the memory cluster's RVs are integers
    });
    return out;
  }

  static void conditionMessages(const api::Result<Json>& obj, std::vector<std::string>& out) {
    if (obj.ok() && obj->contains("status") && (*obj)["status"].contains("conditions"))
      for (const auto& c : (*obj)["status"]["conditions"]) out.push_back(c.value("message", ""));
  }

  std::string latestPodMessage(const std::string& ref) {
    Json p = pod(ref);
    if (p.is_null()) return "";
    if (p.contains("status") && p["status"].contains("conditions"))
      for (const auto& c : p["status"]["conditions"])
        if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") return c.value("message", "");
    return "";
  }

  std::string reasonSuffix(const std::string& ref) {
    const std::string r = latestPodMessage(ref);
    return r.empty() ? "" : " (" + r + ")";
  }

  const Observed& seen_;
  ScenarioOutcome& outcome_;
};

/// One expectation: its key in the file and how it is checked.
struct Expectation {
  const char* key;
  api::Status (*check)(Checker&, const Json& value, const std::string& where);
};

const Expectation kExpectations[] = {
    {"bound", [](Checker& c, const Json& v, const std::string& w) { return c.bound(v, w); }},
    {"pending", [](Checker& c, const Json& v, const std::string& w) { return c.pending(v, w); }},
    {"evicted", [](Checker& c, const Json& v, const std::string& w) { return c.evicted(v, w, true); }},
    {"notEvicted", [](Checker& c, const Json& v, const std::string& w) { return c.evicted(v, w, false); }},
    {"boundCount", [](Checker& c, const Json& v, const std::string& w) { return c.boundCount(v, w); }},
    {"sameNode", [](Checker& c, const Json& v, const std::string& w) { return c.nodes(v, w, true); }},
    {"differentNodes", [](Checker& c, const Json& v, const std::string& w) { return c.nodes(v, w, false); }},
    {"sameGpu", [](Checker& c, const Json& v, const std::string& w) { return c.gpus(v, w, true); }},
    {"differentGpus", [](Checker& c, const Json& v, const std::string& w) { return c.gpus(v, w, false); }},
    {"reservationPods", [](Checker& c, const Json& v, const std::string& w) { return c.reservationPods(v, w); }},
    {"gpuMemoryLimit", [](Checker& c, const Json& v, const std::string& w) { return c.gpuMemoryLimit(v, w); }},
    {"gpuCoreLimit", [](Checker& c, const Json& v, const std::string& w) { return c.gpuCoreLimit(v, w); }},
    {"gpuUuid", [](Checker& c, const Json& v, const std::string& w) { return c.gpuUuid(v, w); }},
    {"queueAllocated", [](Checker& c, const Json& v, const std::string& w) { return c.queueAllocated(v, w); }},
    {"unschedulableReason", [](Checker& c, const Json& v, const std::string& w) { return c.reason(v, w); }},
    {"pipelined", [](Checker& c, const Json& v, const std::string& w) { return c.pipelined(v, w); }},
};

std::string expectationKeys() {
  std::string s;
  for (const auto& e : kExpectations) s += (s.empty() ? "" : ", ") + std::string(e.key);
  return s;
}

}  // namespace

api::Status checkExpectations(const Json& expect, const std::string& where, const Observed& observed,
                              ScenarioOutcome& outcome) {
  if (!expect.is_object()) return malformed(where, "must be a map");
  Checker checker(observed, outcome);
  for (const auto& item : expect.items()) {
    const std::string& key = item.key();
    const Json& v = item.value();
    const auto* e = std::find_if(std::begin(kExpectations), std::end(kExpectations),
                                 [&](const Expectation& x) { return key == x.key; });
    if (e == std::end(kExpectations))
      return malformed(where, "unknown expectation \"" + key + "\" (valid: " + expectationKeys() + ")");
    ++outcome.expectationsChecked;
    TESSERA_TRY(e->check(checker, v, where + "." + key));
  }
  return api::Status::success();
}

}  // namespace tessera::app::scenario
