// AdmissionReview v1 handling and the pod mutation of `tessera webhook`. The rules are in
// include/tessera/webhook/admission.h and docs/gpu-sharing.md; here is how they are applied.
#include "tessera/webhook/admission.h"

#include <algorithm>
#include <mutex>
#include <random>

#include <nlohmann/json.hpp>

#include "tessera/api/convert.h"
#include "tessera/api/result.h"
#include "tessera/isolation/region_layout.h"

namespace tessera::webhook {

namespace {

using Json = nlohmann::json;

constexpr const char* kAdmissionApiVersion = "admission.k8s.io/v1";

/// The GPU annotations whose change on UPDATE is validated again.
constexpr const char* kGpuKeys[] = {
    api::keys::kGpuFraction,  api::keys::kGpuMemory,  api::keys::kGpuFractionNumDevices,
    api::keys::kGpuPolicy,    api::keys::kNodePolicy, api::keys::kUseGpuType,
    api::keys::kAvoidGpuType, api::keys::kIsolation,  api::keys::kGpuConfigMapAnnotation,
    api::keys::kGpuCores,     api::keys::kGpuCoresPolicy, api::keys::kNoUseGpuType,
    api::keys::kUseGpuUuid,   api::keys::kNoUseGpuUuid,   api::keys::kHamiUseGpuUuid,
    api::keys::kHamiNoUseGpuUuid};

Decision deny(int code, std::string message) {
  Decision d;
  d.allowed = false;
  d.code = code;
  d.message = std::move(message);
  return d;
}

/// JSON pointer escaping of one reference token (RFC 6901).
std::string escapeToken(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

const Json* member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string stringAt(const Json& j, const char* key) {
  const Json* m = member(j, key);
  return m && m->is_string() ? m->get<std::string>() : std::string();
}

/// A DNS-1123 subdomain (what a ConfigMap name must be).
bool validObjectName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '.') return false;
    if ((i == 0 || i + 1 == s.size()) && !alnum) return false;
  }
  return true;
}

/// The annotations of a pod's metadata as a StringMap; non-string values are skipped (the API
/// server refuses them before admission anyway).
api::StringMap annotationsOf(const Json& pod) {
  api::StringMap out;
  const Json* md = member(pod, "metadata");
  const Json* an = md ? member(*md, "annotations") : nullptr;
  if (an && an->is_object())
    for (const auto& [k, v] : an->items())
      if (v.is_string()) out[k] = v.get<std::string>();
  return out;
}

/// Collects JSONPatch operations.
class Patch {
 public:
  void add(const std::string& path, Json value) {
    ops_.push_back({{"op", "add"}, {"path", path}, {"value", std::move(value)}});
  }
  void replace(const std::string& path, Json value) {
    ops_.push_back({{"op", "replace"}, {"path", path}, {"value", std::move(value)}});
  }
  std::string dump() const { return ops_.dump(); }

 private:
  Json ops_ = Json::array();
};

/// One volume mount the backend adds to every container.
struct Mount {
  std::string volume, mountPath;
  bool readOnly = false;
  std::string subPathExpr;  ///< empty: none
};

/// What one container gets, per backend.
struct Wiring {
  std::string configMap;
  api::Isolation isolation = api::Isolation::Hard;
  std::vector<Json> env;  ///< env entries ({name, value} or {name, valueFrom}), added when the name is absent
  std::string ldPreload;  ///< hard: the library path (merged into LD_PRELOAD)
  std::vector<Mount> mounts;
};

Json envValue(const std::string& name, const std::string& value) { return {{"name", name}, {"value", value}}; }
Json envField(const std::string& name, const std::string& fieldPath) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", fieldPath}}}}}};
}

/// Merges `w.ldPreload` into the container's LD_PRELOAD entry (`toAdd` gets a new one when absent).
api::Status wireLdPreload(const std::string& cname, const Json* envList, const std::string& base, const Wiring& w,
                          std::vector<Json>& toAdd, Patch& patch) {
  bool found = false;
  for (size_t i = 0; envList && i < envList->size(); ++i) {
    const Json& e = (*envList)[i];
    if (stringAt(e, "name") != "LD_PRELOAD") continue;
    found = true;
    if (member(e, "valueFrom"))
      return api::makeError("container " + cname +
                                ": env LD_PRELOAD is set with valueFrom; the hard isolation backend must add " +
                                w.ldPreload + " to it (set it as a plain value, or use " + api::keys::kIsolation +
                                ": none)",
                            422);
    const std::string cur = stringAt(e, "value");
    // Already there (a second mutation)? LD_PRELOAD entries are separated by ':' or ' '.
    bool present = false;
    size_t start = 0;
    while (start <= cur.size()) {
      size_t end = cur.find_first_of(": ", start);
      if (end == std::string::npos) end = cur.size();
      if (cur.compare(start, end - start, w.ldPreload) == 0 && end - start == w.ldPreload.size()) present = true;
      start = end + 1;
    }
    if (!present)
      patch.replace(base + "/env/" + std::to_string(i) + "/value", cur.empty() ? w.ldPreload : w.ldPreload + ":" + cur);
  }
  if (!found) toAdd.push_back(envValue("LD_PRELOAD", w.ldPreload));
  return api::Status::success();
}

/// Wires one container (`base` is its JSON pointer): envFrom of the ConfigMap, the backend's env
/// (names already set by the user are left alone; LD_PRELOAD is merged) and volume mounts. Adds
/// only what is missing, so a second mutation adds nothing.
api::Status wireContainer(const Json& c, const std::string& base, const Wiring& w, Patch& patch) {
  const std::string cname = stringAt(c, "name");
  // envFrom: the GPU ConfigMap, not optional.
  const Json cmRef = {{"configMapRef", {{"name", w.configMap}}}};
  const Json* envFrom = member(c, "envFrom");
  if (!envFrom || !envFrom->is_array()) {
    patch.add(base + "/envFrom", Json::array({cmRef}));
  } else {
    bool has = false;
    for (const auto& e : *envFrom)
      if (const Json* r = member(e, "configMapRef"); r && stringAt(*r, "name") == w.configMap) has = true;
    if (!has) patch.add(base + "/envFrom/-", cmRef);
  }
  // env
  const Json* envList = member(c, "env");
  if (envList && !envList->is_array()) envList = nullptr;
  std::vector<Json> toAdd;
  if (!w.ldPreload.empty()) TESSERA_TRY(wireLdPreload(cname, envList, base, w, toAdd, patch));
  for (const Json& entry : w.env) {
    const std::string name = stringAt(entry, "name");
    const bool found = envList && std::any_of(envList->begin(), envList->end(),
                                              [&](const Json& e) { return stringAt(e, "name") == name; });
    if (!found) toAdd.push_back(entry);
  }
  if (!toAdd.empty()) {
    if (!envList) {
      patch.add(base + "/env", Json(toAdd));
    } else {
      for (auto& e : toAdd) patch.add(base + "/env/-", std::move(e));
    }
  }
  // volumeMounts
  const Json* mounts = member(c, "volumeMounts");
  if (mounts && !mounts->is_array()) mounts = nullptr;
  std::vector<Json> mountsToAdd;
  for (const Mount& m : w.mounts) {
    Json mount = {{"name", m.volume}, {"mountPath", m.mountPath}, {"readOnly", m.readOnly}};
    if (!m.subPathExpr.empty()) mount["subPathExpr"] = m.subPathExpr;
    bool has = false;
    for (size_t i = 0; mounts && i < mounts->size(); ++i) {
      const Json& existing = (*mounts)[i];
      if (stringAt(existing, "name") == m.volume) has = true;
      else if (stringAt(existing, "mountPath") == m.mountPath)
        return api::makeError("container " + cname + ": volume " + stringAt(existing, "name") +
                                  " is already mounted at " + m.mountPath + ", where the " +
                                  (w.isolation == api::Isolation::Mps ? "mps" : "hard") + " isolation backend mounts " +
                                  m.volume,
                              422);
    }
    if (!has) mountsToAdd.push_back(std::move(mount));
  }
  if (!mountsToAdd.empty()) {
    if (!mounts) {
      patch.add(base + "/volumeMounts", Json(mountsToAdd));
    } else {
      for (auto& m : mountsToAdd) patch.add(base + "/volumeMounts/-", std::move(m));
    }
  }
  return api::Status::success();
}

std::string withoutTrailingSlash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

/// Hard isolation: the interposer (mounted read-only, LD_PRELOAD) and the pod's accounting region
/// (docs/isolation.md, "Pod-level accounting"): every container mounts the same per-pod folder and
/// names the same file in it. By default both are emptyDirs, so the pod needs no hostPath
/// (PodSecurity `baseline`): the library is copied in by the init container
/// interposerInitContainer() adds, and the monitor reads the region on the node under the kubelet's
/// pod folder. With InterposerSource::HostPath, the node folders the DaemonSets prepare, the
/// region folder through subPathExpr on the pod UID from the downward API. Returns the pod volumes
/// to add.
std::vector<Json> wireHard(const Options& options, Wiring& w) {
  const std::string dir = withoutTrailingSlash(options.interposerDir);
  const bool hostPath = options.interposerSource == InterposerSource::HostPath;
  w.ldPreload = dir + "/" + kInterposerLibrary;
  w.mounts.push_back({kInterposerVolume, dir, true, ""});
  w.mounts.push_back(
      {kRegionVolume, kRegionMountPath, false, hostPath ? std::string("$(") + kPodUidEnv + ")" : std::string()});
  w.env.push_back(envField(kPodUidEnv, "metadata.uid"));
  w.env.push_back(envField("TESSERA_POD_NAMESPACE", "metadata.namespace"));
  w.env.push_back(envField("TESSERA_POD_NAME", "metadata.name"));
  w.env.push_back(envValue(api::keys::kIsolationRegionEnv, std::string(kRegionMountPath) + "/" + isolation::kRegionFileName));
  if (hostPath)
    return {{{"name", kInterposerVolume}, {"hostPath", {{"path", dir}, {"type", "Directory"}}}},
            {{"name", kRegionVolume},
             {"hostPath", {{"path", withoutTrailingSlash(options.regionHostDir)}, {"type", "Directory"}}}}};
  // On the node's disk (no medium: Memory): a tmpfs would be a mount of its own, which the
  // monitor's view of the kubelet's folder does not see without mount propagation.
  return {{{"name", kInterposerVolume}, {"emptyDir", Json::object()}},
          {{"name", kRegionVolume}, {"emptyDir", Json::object()}}};
}

/// The init container that copies the library from the interposer image into the emptyDir. It
/// runs before the pod's own init containers (they are preloaded too), needs no shell (`cp` of the
/// image), and passes the PodSecurity `restricted` level itself: uid 65532 (the emptyDir is mode
/// 0777; the copy is 0644, readable by containers of any uid), no privilege escalation, no
/// capabilities, RuntimeDefault seccomp, read-only root filesystem. Small fixed resources, with
/// limits, so that namespaces whose LimitRange or ResourceQuota demands them admit it.
Json interposerInitContainer(const Options& options) {
  return {
      {"name", kInterposerInitContainer},
      {"image", options.interposerImage},
      {"imagePullPolicy", "IfNotPresent"},
      {"command", Json::array({"cp", options.interposerImageLibrary,
                               std::string(kInterposerCopyPath) + "/" + kInterposerLibrary})},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", 65532},
        {"runAsGroup", 65532},
        {"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", Json::array({"ALL"})}}},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"resources",
       {{"requests", {{"cpu", "10m"}, {"memory", "16Mi"}}}, {"limits", {{"cpu", "100m"}, {"memory", "32Mi"}}}}},
      {"volumeMounts", Json::array({{{"name", kInterposerVolume}, {"mountPath", kInterposerCopyPath}}})},
  };
}

Decision reviewImpl(const std::string& operation, const Json& pod, const Json* oldPod, bool mutate,
                    const Options& options, const SuffixSource& suffix) {
  if (operation != "CREATE" && operation != "UPDATE") return Decision{};  // DELETE, CONNECT: nothing to check
  if (!pod.is_object()) return deny(400, "request.object: expected a Pod object");
  const Json* spec = member(pod, "spec");
  if (!spec || stringAt(*spec, "schedulerName") != options.schedulerName) return Decision{};  // not ours
  const api::StringMap annotations = annotationsOf(pod);
  if (operation == "UPDATE") {
    // Only a change of the GPU annotations is validated again: a pod admitted (or created while the
    // webhook was down) must stay updatable (labels, finalizers), and the pod spec is immutable.
    const api::StringMap before = oldPod ? annotationsOf(*oldPod) : api::StringMap{};
    bool changed = false;
    for (const char* k : kGpuKeys) {
      auto a = annotations.find(std::string_view(k));
      auto b = before.find(std::string_view(k));
      if ((a == annotations.end()) != (b == before.end()) || (a != annotations.end() && a->second != b->second))
        changed = true;
    }
    if (!changed) return Decision{};
  }
  auto parsed = api::podFromJson(pod);
  if (!parsed.ok()) return deny(422, parsed.error().message);
  auto gpu = api::parsePodGpuSpec(annotations, parsed->requests);
  if (!gpu.ok()) return deny(422, gpu.error().message);
  const std::string* cmAnnotation = parsed->meta.annotation(api::keys::kGpuConfigMapAnnotation);
  if (cmAnnotation && !validObjectName(*cmAnnotation))
    return deny(422, std::string("annotation ") + api::keys::kGpuConfigMapAnnotation + ": \"" +
                         cmAnnotation->substr(0, 64) +
                         "\" is not a valid ConfigMap name (lower-case letters, digits, '-' and '.', at most 253)");
  if (!mutate || operation != "CREATE" || !gpu->shared()) return Decision{};

  // ---- mutation ----
  Patch patch;
  Wiring w;
  if (cmAnnotation) {
    w.configMap = *cmAnnotation;
  } else if (!parsed->meta.name.empty()) {
    w.configMap = api::gpuConfigMapName(parsed->meta);
  } else {
    // generateName: the name is chosen after admission, so the ConfigMap gets one now.
    std::string prefix = parsed->meta.generateName.empty() ? "pod-" : parsed->meta.generateName;
    const std::string tail = suffix() + "-tessera-gpu";
    if (prefix.size() + tail.size() > 253) prefix.resize(253 - tail.size());  // a ConfigMap name's limit
    w.configMap = prefix + tail;
    if (!validObjectName(w.configMap))
      return deny(422, "metadata.generateName: \"" + parsed->meta.generateName.substr(0, 64) +
                           "\" does not give a valid ConfigMap name for the GPU environment (" + w.configMap + ")");
    const Json* md = member(pod, "metadata");
    const Json* an = md ? member(*md, "annotations") : nullptr;
    if (!md) patch.add("/metadata", {{"annotations", {{api::keys::kGpuConfigMapAnnotation, w.configMap}}}});
    else if (!an || !an->is_object())
      patch.add("/metadata/annotations", {{api::keys::kGpuConfigMapAnnotation, w.configMap}});
    else patch.add("/metadata/annotations/" + escapeToken(api::keys::kGpuConfigMapAnnotation), w.configMap);
  }
  w.isolation = gpu->isolation == api::Isolation::Unset ? options.isolation : gpu->isolation;
  std::vector<Json> volumes;
  if (w.isolation == api::Isolation::Hard) {
    volumes = wireHard(options, w);
  } else if (w.isolation == api::Isolation::Mps) {
    w.mounts.push_back({kMpsVolume, options.mpsPipeDir, false, ""});
    volumes.push_back({{"name", kMpsVolume}, {"hostPath", {{"path", options.mpsPipeDir}, {"type", "Directory"}}}});
    w.env.push_back(envValue("CUDA_MPS_PIPE_DIRECTORY", options.mpsPipeDir));
    // Known at admission: the compute share of a fraction request and the memory of a memory
    // request. The other one depends on the node's GPUs: the binder writes it into the ConfigMap
    // under the same name, and envFrom delivers it (an env entry would shadow it, so none is added).
    if (gpu->fractionMilli > 0)
      w.env.push_back(envValue("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string((gpu->fractionMilli + 9) / 10)));
    if (gpu->memoryMiB > 0) {
      std::string limits;
      for (int32_t d = 0; d < gpu->numDevices; ++d)
        limits += (d ? "," : "") + std::to_string(d) + "=" + std::to_string(gpu->memoryMiB) + "M";
      w.env.push_back(envValue("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", limits));
    }
  }
  const Json* vols = member(*spec, "volumes");
  std::vector<Json> volumesToAdd;
  for (Json& volume : volumes) {
    const std::string name = stringAt(volume, "name");
    if (!vols || !vols->is_array() ||
        std::none_of(vols->begin(), vols->end(), [&](const Json& v) { return stringAt(v, "name") == name; }))
      volumesToAdd.push_back(std::move(volume));
  }
  if (!volumesToAdd.empty()) {
    if (!vols || !vols->is_array()) {
      patch.add("/spec/volumes", Json(volumesToAdd));
    } else {
      for (auto& v : volumesToAdd) patch.add("/spec/volumes/-", std::move(v));
    }
  }
  const bool copyInterposer =
      w.isolation == api::Isolation::Hard && options.interposerSource == InterposerSource::InitContainer;
  bool hasCopier = false;
  for (const char* list : {"initContainers", "containers"}) {
    const Json* cs = member(*spec, list);
    if (!cs || !cs->is_array()) continue;
    for (size_t i = 0; i < cs->size(); ++i) {
      if (!(*cs)[i].is_object()) continue;  // podFromJson refused such a pod already; never patch into it
      if (copyInterposer && std::string_view(list) == "initContainers" &&
          stringAt((*cs)[i], "name") == kInterposerInitContainer) {
        hasCopier = true;  // ours, from a first mutation: it runs before the library exists
        continue;
      }
      Wiring cw = w;
      // The container's name labels its processes in the pod's region (tessera monitor).
      if (w.isolation == api::Isolation::Hard)
        cw.env.push_back(envValue("TESSERA_CONTAINER_NAME", stringAt((*cs)[i], "name")));
      auto st = wireContainer((*cs)[i], std::string("/spec/") + list + "/" + std::to_string(i), cw, patch);
      if (!st.ok()) return deny(st.error().code, st.error().message);
    }
  }
  // Last, so that the operations above still address the containers by their original index.
  if (copyInterposer && !hasCopier) {
    const Json* inits = member(*spec, "initContainers");
    if (!inits || !inits->is_array())
      patch.add("/spec/initContainers", Json::array({interposerInitContainer(options)}));
    else patch.add("/spec/initContainers/0", interposerInitContainer(options));
  }
  Decision d;
  d.patch = patch.dump();
  return d;
}

HttpAnswer badRequest(const std::string& what) {
  return HttpAnswer{400, "text/plain; charset=utf-8", "malformed AdmissionReview: " + what + "\n",
                    "malformed AdmissionReview: " + what};
}

std::string typeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "a list";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    default: return "a number";
  }
}

HttpAnswer review(const std::string& body, bool mutate, const Options& options, const SuffixSource& suffix) {
  Json doc = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return badRequest("the body is not valid JSON");
  if (!doc.is_object()) return badRequest("expected a JSON object, got " + typeName(doc));
  const std::string apiVersion = stringAt(doc, "apiVersion");
  if (apiVersion != kAdmissionApiVersion)
    return badRequest("apiVersion: \"" + apiVersion.substr(0, 64) + "\" is not supported (only " +
                      kAdmissionApiVersion + "; set admissionReviewVersions: [v1])");
  if (stringAt(doc, "kind") != "AdmissionReview")
    return badRequest("kind: \"" + stringAt(doc, "kind").substr(0, 64) + "\" (expected AdmissionReview)");
  const Json* req = member(doc, "request");
  if (!req || !req->is_object()) return badRequest("request: required (an object)");
  const Json* uid = member(*req, "uid");
  if (!uid || !uid->is_string() || uid->get_ref<const std::string&>().empty())
    return badRequest("request.uid: required (a non-empty string)");
  const std::string operation = stringAt(*req, "operation");
  if (operation.empty()) return badRequest("request.operation: required");
  const Json* object = member(*req, "object");
  if ((operation == "CREATE" || operation == "UPDATE") && (!object || !object->is_object()))
    return badRequest("request.object: required for " + operation + " (an object)");
  const Json* old = member(*req, "oldObject");

  Decision d;
  const Json* kind = member(*req, "kind");
  const bool isPod = kind && stringAt(*kind, "kind") == "Pod" && stringAt(*kind, "group").empty();
  const bool subresource = !stringAt(*req, "subResource").empty();
  if (isPod && !subresource && object) {
    Json pod = *object;
    // A pod created in a namespace may carry none itself: the request says which.
    if (pod.is_object() && pod.contains("metadata") && pod["metadata"].is_object() &&
        !pod["metadata"].contains("namespace") && !stringAt(*req, "namespace").empty())
      pod["metadata"]["namespace"] = stringAt(*req, "namespace");
    d = reviewPod(operation, pod, old && old->is_object() ? old : nullptr, mutate, options, suffix);
  }
  Json response = {{"uid", *uid}, {"allowed", d.allowed}};
  if (!d.allowed) response["status"] = {{"code", d.code}, {"message", d.message}, {"reason", "Invalid"}};
  if (d.allowed && d.hasPatch()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = base64Encode(d.patch);
  }
  Json out = {{"apiVersion", kAdmissionApiVersion}, {"kind", "AdmissionReview"}, {"response", std::move(response)}};
  HttpAnswer a{200, "application/json", out.dump(), ""};
  std::string who = "?";
  if (object && object->is_object()) {
    const Json* md = member(*object, "metadata");
    std::string ns = md ? stringAt(*md, "namespace") : "";
    if (ns.empty()) ns = stringAt(*req, "namespace");
    std::string name = md ? stringAt(*md, "name") : "";
    if (name.empty() && md) name = stringAt(*md, "generateName") + "*";
    who = ns + "/" + name;
  }
  a.summary = std::string(mutate ? "mutate " : "validate ") + operation + " " + (kind ? stringAt(*kind, "kind") : "?") +
              " " + who + ": " +
              (!d.allowed     ? "denied: " + d.message
               : d.hasPatch() ? "allowed, patched"
                              : "allowed");
  return a;
}

}  // namespace

SuffixSource randomSuffixes(uint64_t seed) {
  struct State {
    std::mutex mu;
    std::mt19937_64 rng;
  };
  auto state = std::make_shared<State>();
  state->rng.seed(seed != 0 ? seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}());
  return [state] {
    // The API server's alphabet for generated names: no vowels, no look-alikes.
    static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    std::lock_guard lock(state->mu);
    std::string s;
    for (int i = 0; i < 5; ++i) s += kAlphabet[state->rng() % (sizeof kAlphabet - 1)];
    return s;
  };
}

Decision reviewPod(const std::string& operation, const nlohmann::json& pod, const nlohmann::json* oldPod, bool mutate,
                   const Options& options, const SuffixSource& suffix) {
  try {
    return reviewImpl(operation, pod, oldPod, mutate, options, suffix);
  } catch (const std::exception& e) {  // a JSON accessor on an unexpected type: refuse, never crash
    return deny(400, std::string("cannot review the pod: ") + e.what());
  }
}

HttpAnswer handleRequest(const std::string& method, const std::string& path, const std::string& body,
                         const Options& options, const SuffixSource& suffix) {
  try {
    if (path == "/healthz" || path == "/readyz") {
      if (method != "GET" && method != "HEAD") return HttpAnswer{405, "text/plain; charset=utf-8", "use GET\n", ""};
      return HttpAnswer{200, "text/plain; charset=utf-8", "ok\n", ""};
    }
    if (path != "/mutate" && path != "/validate")
      return HttpAnswer{404, "text/plain; charset=utf-8",
                        "not found: " + path.substr(0, 128) + " (paths: /mutate, /validate, /healthz)\n",
                        "not found: " + path.substr(0, 128)};
    if (method != "POST")
      return HttpAnswer{405, "text/plain; charset=utf-8", path + ": use POST with an AdmissionReview\n",
                        method + " " + path + ": method not allowed"};
    return review(body, path == "/mutate", options, suffix);
  } catch (const std::exception& e) {
    return HttpAnswer{500, "text/plain; charset=utf-8", std::string("internal error: ") + e.what() + "\n",
                      std::string("internal error: ") + e.what()};
  }
}

std::string base64Encode(const std::string& data) {
  static constexpr char kTable[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const uint32_t v =
        (uint32_t(uint8_t(data[i])) << 16) | (uint32_t(uint8_t(data[i + 1])) << 8) | uint8_t(data[i + 2]);
    out += kTable[(v >> 18) & 63];
    out += kTable[(v >> 12) & 63];
    out += kTable[(v >> 6) & 63];
    out += kTable[v & 63];
  }
  if (i < data.size()) {
    uint32_t v = uint32_t(uint8_t(data[i])) << 16;
    if (i + 1 < data.size()) v |= uint32_t(uint8_t(data[i + 1])) << 8;
    out += kTable[(v >> 18) & 63];
    out += kTable[(v >> 12) & 63];
    out += i + 1 < data.size() ? kTable[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace tessera::webhook
