#include "tessera/binder/gpu_binding.h"
#include "tessera/binder/events.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "tessera/api/convert.h"
#include "tessera/api/gpu_request.h"
#include "tessera/api/log.h"
#include "tessera/api/objects.h"

namespace tessera::binder {

namespace {

std::string annotationOf(const cache::Json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  const auto& m = obj["metadata"];
  if (!m.contains("annotations") || !m["annotations"].is_object()) return "";
  const auto it = m["annotations"].find(key);
  return it != m["annotations"].end() && it->is_string() ? it->get<std::string>() : "";
}

bool terminating(const cache::Json& obj) {
  return obj.is_object() && obj.contains("metadata") && obj["metadata"].is_object() &&
         obj["metadata"].contains("deletionTimestamp") && !obj["metadata"]["deletionTimestamp"].is_null();
}

/// "0.5" for 500 thousandths, "0.125", "0.001".
std::string portionText(int64_t milli) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(milli / 1000),
                static_cast<long long>(milli % 1000));
  std::string s = buf;
  while (s.size() > 3 && s.back() == '0') s.pop_back();
  return s;
}

}  // namespace

struct GpuBinding::Impl {
  struct Inflight;
  /// The pod of an in-flight bind is gone or has finished, as the snapshot shows it.
  static bool finished(const cache::Snapshot& snap, const Inflight& in);

  cache::ClusterClient& client;
  const api::Clock& clock;
  GpuBindingOptions options;

  std::mutex mu;  ///< guards groupLocks, inflight, counters, reported
  std::map<std::string, std::shared_ptr<std::mutex>> groupLocks;
  /// A group prepared for a bind that the cache may not show yet.
  struct Inflight {
    api::Time since;
    std::string podKey, jobKey;
  };
  std::map<std::string, Inflight> inflight;  ///< by group id
  std::set<std::string> reportedOrphans;  ///< pod keys already told
  uint64_t deleted = 0, orphans = 0;

  Impl(cache::ClusterClient& c, const api::Clock& k, GpuBindingOptions o)
      : client(c), clock(k), options(std::move(o)) {}

  std::shared_ptr<std::mutex> lockOf(const std::string& group) {
    std::lock_guard<std::mutex> g(mu);
    auto& l = groupLocks[group];
    if (!l) l = std::make_shared<std::mutex>();
    return l;
  }

  /// The group's reservation pod exists on `node` and has reported its GPU: returns the UUID.
  /// Under hard isolation, a fraction on a node without nvidia.com/gpu.memory (memoryMiB 0: the
  /// placement knew no memory size) would run with no memory limit the interposer can enforce.
  api::Status checkHardIsolation(const framework::SessionResult::Bind& b, const std::string& ns,
                                 const std::string& name) {
    if (options.isolation == api::Isolation::Unset) return {};
    if (std::none_of(b.gpus.begin(), b.gpus.end(), [](const auto& a) { return a.memoryMiB <= 0; })) return {};
    auto pod = client.get(api::Kind::Pod, ns, name);
    if (!pod.ok()) return api::makeError("Pod " + b.podKey + ": reading it before binding: " + pod.error().message);
    std::string isolation;
    if (pod->contains("metadata") && (*pod)["metadata"].contains("annotations"))
      isolation = (*pod)["metadata"]["annotations"].value(api::keys::kIsolation, "");
    const bool hard = isolation.empty() ? options.isolation == api::Isolation::Hard : isolation == "hard";
    if (!hard) return {};
    return api::makeError("Pod " + b.podKey + ": node " + b.node + " has no label " + api::keys::kNodeGpuMemoryLabel +
                          ": hard GPU isolation cannot limit the memory of a fraction there");
  }

  /// One look at the group's reservation pod, created when missing (then looked at again at once:
  /// the kubelet may have started it already). Returns its GPU UUID, or "" while it has not
  /// reported one; `refused`: the kubelet failed it (no free GPU), no point in waiting. An error:
  /// it is terminating, on another node, or the API failed.
  api::Result<std::string> lookAtReservation(const std::string& group, const std::string& node, bool& refused) {
    const std::string& ns = options.reservationNamespace;
    const std::string name = reservationPodName(group);
    auto pod = client.get(api::Kind::Pod, ns, name);
    if (!pod.ok() && pod.error().code == 404) {
      auto created = client.create(api::Kind::Pod, GpuBinding::reservationPod(options, group, node));
      if (!created.ok() && created.error().code != 409)
        return api::makeError("GPU group " + group + ": creating reservation pod " + ns + "/" + name + ": " +
                              created.error().message);
      pod = client.get(api::Kind::Pod, ns, name);
    }
    if (!pod.ok())
      return api::makeError("GPU group " + group + ": reading reservation pod " + ns + "/" + name + ": " +
                            pod.error().message);
    if (terminating(*pod))
      return api::makeError("GPU group " + group + ": reservation pod " + ns + "/" + name + " is terminating");
    const std::string on = (*pod)["spec"].value("nodeName", "");
    if (on != node)
      return api::makeError("GPU group " + group + ": reservation pod " + ns + "/" + name + " is on node " + on +
                            ", not " + node);
    // `tessera reserve` (the device plugin gave it a GPU) reports the UUID.
    const std::string uuid = annotationOf(*pod, api::keys::kGpuUuidAnnotation);
    refused = uuid.empty() && pod->contains("status") && (*pod)["status"].is_object() &&
              (*pod)["status"].value("phase", "") == "Failed";
    return uuid;
  }

  /// tessera.dev/use-gpu-uuid / nouse-gpu-uuid against the GPUs the device plugin gave the pod's
  /// groups. The session joins only groups of allowed UUIDs, but a new group's GPU is the device
  /// plugin's choice: when it is excluded, the bind fails and the reservation pod keeps that GPU
  /// (an empty group, collected later), so the next attempt, at once, gets another.
  std::optional<PreBindOutcome> checkDeviceRules(const cache::Json& pod, const framework::SessionResult::Bind& b,
                                                 const std::vector<std::string>& uuids) {
    auto meta = api::metaFromJson(pod);
    if (!meta.ok()) return std::nullopt;
    auto rules = api::parseGpuUuidRules(meta->annotations);
    if (!rules.ok() || !rules->filtersGpuUuids()) return std::nullopt;  // the scheduler reported a bad one
    for (size_t i = 0; i < uuids.size() && i < b.gpus.size(); ++i) {
      if (rules->gpuUuidAllowed(uuids[i])) continue;
      const char* rule = !rules->useGpuUuids.empty() && std::find(rules->useGpuUuids.begin(), rules->useGpuUuids.end(),
                                                                  uuids[i]) == rules->useGpuUuids.end()
                             ? api::keys::kUseGpuUuid
                             : api::keys::kNoUseGpuUuid;
      return PreBindOutcome::failedRetryAtOnce(api::makeError(
          "Pod " + b.podKey + ": GPU group " + b.gpus[i].group + " on node " + b.node + " was given GPU " + uuids[i] +
          ", which " + rule + " excludes; its reservation pod keeps that GPU and the pod is placed again"));
    }
    return std::nullopt;
  }

  /// Gives up on a reservation pod that did not report its UUID in time (or was refused): deletes
  /// it, so that the next attempt starts afresh, and says why.
  api::Error giveUp(const std::string& group, const std::string& node) {
    const std::string& ns = options.reservationNamespace;
    const std::string name = reservationPodName(group);
    cache::DeleteOptions del;
    del.gracePeriodSeconds = 0;
    (void)client.remove(api::Kind::Pod, ns, name, del);
    return api::makeError("GPU group " + group + ": reservation pod " + ns + "/" + name + " on node " + node +
                          " did not report its GPU UUID (annotation " + api::keys::kGpuUuidAnnotation + ") within " +
                          api::formatDuration(api::Duration{options.uuidTimeout.count()}) + "; deleted it");
  }

  /// `corePercent`: the compute limit the scheduler decided (cluster defaults included), or -1 to
  /// read it from the pod's annotations.
  api::Status writeConfigMap(const cache::Json& pod, const std::string& podKey,
                             const std::vector<framework::SessionResult::GpuAssignment>& gpus,
                             const std::vector<std::string>& uuids, int32_t corePercent) {
    const auto& meta = pod["metadata"];
    const std::string ns = meta.value("namespace", "");
    api::ObjectMeta m;
    m.name = meta.value("name", "");
    if (meta.contains("annotations") && meta["annotations"].is_object())
      if (auto it = meta["annotations"].find(api::keys::kGpuConfigMapAnnotation);
          it != meta["annotations"].end() && it->is_string())
        m.annotations[api::keys::kGpuConfigMapAnnotation] = it->get<std::string>();
    const std::string name = api::gpuConfigMapName(m);
    std::string visible;
    for (const auto& u : uuids) visible += (visible.empty() ? "" : ",") + u;
    cache::Json data = {{"NVIDIA_VISIBLE_DEVICES", visible}, {"GPU_PORTION", portionText(gpus.front().portionMilli)}};
    if (gpus.front().memoryMiB > 0) {
      const std::string bytes = std::to_string(gpus.front().memoryMiB * 1024 * 1024);
      data["GPU_MEMORY_LIMIT"] = bytes;
      data["CUDA_DEVICE_MEMORY_LIMIT"] = bytes;
      // MPS backend: the same limit per visible device (renumbered 0..n-1 in the container).
      std::string pinned;
      for (size_t i = 0; i < gpus.size(); ++i) {
        if (i) pinned += ',';
        pinned += std::to_string(i) + "=" + std::to_string(gpus[i].memoryMiB) + "M";
      }
      data["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = pinned;
    }
    // The compute limit (docs/isolation.md, "Compute limit"): tessera.dev/gpu-cores, else the
    // fraction. CUDA_DEVICE_SM_LIMIT is HAMi-core's name for the same percentage.
    {
      api::StringMap annotations;
      if (meta.contains("annotations") && meta["annotations"].is_object())
        for (const auto& [key, value] : meta["annotations"].items())
          if (value.is_string()) annotations[key] = value.get<std::string>();
      auto spec = api::parsePodGpuSpec(annotations, api::Resources{});
      if (!spec.ok()) return api::makeError("Pod " + podKey + ": " + spec.error().message);
      const int32_t cores = corePercent >= 0 ? corePercent : api::gpuCoreLimitPercent(*spec);
      if (cores > 0) {
        data["GPU_CORE_LIMIT"] = std::to_string(cores);
        data["CUDA_DEVICE_SM_LIMIT"] = std::to_string(cores);
        data["GPU_CORE_LIMIT_POLICY"] = spec->coresPolicy == api::GpuCoresPolicy::Burst ? "burst" : "strict";
      }
    }
    data["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(std::max<int64_t>(1, (gpus.front().portionMilli + 9) / 10));
    data["TESSERA_GPU_GROUPS"] = [&] {
      std::string s;
      for (const auto& g : gpus) s += (s.empty() ? "" : ",") + g.group;
      return s;
    }();
    cache::Json cm = {
        {"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata",
         {{"name", name},
          {"namespace", ns},
          {"labels", {{"app.kubernetes.io/managed-by", options.component}}},
          {"ownerReferences",
           cache::Json::array({{{"apiVersion", "v1"},
                                {"kind", "Pod"},
                                {"name", m.name},
                                {"uid", meta.value("uid", "")},
                                {"blockOwnerDeletion", false}}})}}},
        {"data", data},
    };
    auto created = client.create(api::Kind::ConfigMap, cm);
    if (created.ok()) return {};
    if (created.error().code != 409)
      return api::makeError("Pod " + podKey + ": creating GPU ConfigMap " + ns + "/" + name + ": " +
                            created.error().message);
    // Left by an earlier attempt (a restart between reservation and bind): rewrite it.
    auto cur = client.get(api::Kind::ConfigMap, ns, name);
    if (!cur.ok())
      return api::makeError("Pod " + podKey + ": reading GPU ConfigMap " + ns + "/" + name + ": " + cur.error().message);
    cm["metadata"]["resourceVersion"] = (*cur)["metadata"].value("resourceVersion", "");
    auto updated = client.update(api::Kind::ConfigMap, cm);
    if (!updated.ok())
      return api::makeError("Pod " + podKey + ": updating GPU ConfigMap " + ns + "/" + name + ": " +
                            updated.error().message);
    return {};
  }

  void event(const std::string& podKey, const std::string& uid, const std::string& type, const std::string& reason,
             const std::string& message) {
    auto [ns, name] = splitKey(podKey);
    const cache::Json ev = makeEvent(api::Kind::Pod, ns, name, uid, type, reason, message, options.component, clock.now());
    (void)client.create(api::Kind::Event, ev);
  }
};

bool GpuBinding::Impl::finished(const cache::Snapshot& snap, const Inflight& in) {
  const cache::JobInfo* job = snap.findJob(in.jobKey);
  if (!job) return true;
  auto it = std::lower_bound(job->tasks.begin(), job->tasks.end(), in.podKey,
                             [](const cache::TaskInfo& t, const std::string& k) { return t.key < k; });
  if (it == job->tasks.end() || it->key != in.podKey) return true;
  return it->status == cache::TaskStatus::Succeeded || it->status == cache::TaskStatus::Failed;
}

GpuBinding::GpuBinding(cache::ClusterClient& client, const api::Clock& clock, GpuBindingOptions options)
    : impl_(std::make_unique<Impl>(client, clock, std::move(options))) {}
GpuBinding::~GpuBinding() = default;

std::string GpuBinding::reservationPodName(const std::string& group) { return "gpu-reservation-" + group; }

cache::Json GpuBinding::reservationPod(const GpuBindingOptions& options, const std::string& group,
                                       const std::string& node) {
  cache::Json env = cache::Json::array();
  env.push_back({{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
  env.push_back({{"name", "POD_NAMESPACE"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}});
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", reservationPodName(group)},
        {"namespace", options.reservationNamespace},
        {"labels",
         {{api::keys::kGpuGroupLabel, group},
          {"app.kubernetes.io/name", "tessera-reservation"},
          {"app.kubernetes.io/managed-by", options.component}}}}},
      {"spec",
       {{"nodeName", node},
        {"serviceAccountName", options.reservationServiceAccount},
        {"terminationGracePeriodSeconds", 5},
        {"tolerations", cache::Json::array({{{"operator", "Exists"}}})},
        // PodSecurity `restricted`: the namespace tessera-reservation can enforce it. The uid is
        // the tessera image's own numeric user (so runAsNonRoot needs no passwd lookup).
        {"securityContext",
         {{"runAsNonRoot", true},
          {"runAsUser", 65532},
          {"runAsGroup", 65532},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
        {"containers",
         cache::Json::array({{{"name", "reserve"},
                              {"image", options.reservationImage},
                              {"args", cache::Json::array({"reserve"})},
                              {"env", env},
                              {"securityContext",
                               {{"allowPrivilegeEscalation", false},
                                {"readOnlyRootFilesystem", true},
                                {"capabilities", {{"drop", cache::Json::array({"ALL"})}}}}},
                              {"resources",
                               {{"requests", {{"nvidia.com/gpu", "1"}, {"cpu", "1m"}, {"memory", "16Mi"}}},
                                {"limits", {{"nvidia.com/gpu", "1"}, {"cpu", "100m"}, {"memory", "64Mi"}}}}}}})}}},
  };
}

PreBindOutcome GpuBinding::prepare(const framework::SessionResult::Bind& b, api::Time since) {
  if (b.gpus.empty()) return PreBindOutcome::done();
  auto [ns, name] = splitKey(b.podKey);
  if (auto st = impl_->checkHardIsolation(b, ns, name); !st.ok()) return PreBindOutcome::done(st);
  const api::Time now = impl_->clock.now();
  {
    // Renewed at each look: a group stays spared by garbage collection while a bind waits on it.
    std::lock_guard<std::mutex> g(impl_->mu);
    for (const auto& a : b.gpus) impl_->inflight[a.group] = Impl::Inflight{now, b.podKey, b.jobKey};
  }
  // Every group is looked at (its reservation pod created when missing) before any wait, so a pod
  // on several GPUs waits for their UUIDs together.
  const bool late = now - since >= api::Duration{impl_->options.uuidTimeout.count()};
  std::vector<std::string> uuids, unreported;
  bool refused = false;
  for (const auto& a : b.gpus) {
    auto lock = impl_->lockOf(a.group);
    std::lock_guard<std::mutex> g(*lock);  // one group at a time: one reservation pod per group
    bool groupRefused = false;
    auto uuid = impl_->lookAtReservation(a.group, b.node, groupRefused);
    if (!uuid.ok()) return PreBindOutcome::done(api::makeError("Pod " + b.podKey + ": " + uuid.error().message));
    if (uuid->empty()) unreported.push_back(a.group);
    refused = refused || groupRefused;
    uuids.push_back(*uuid);
  }
  if (!unreported.empty()) {
    if (!refused && !late) return PreBindOutcome::waitFor(impl_->options.uuidPoll);  // parked meanwhile
    api::Error first;
    for (size_t i = 0; i < unreported.size(); ++i) {
      auto lock = impl_->lockOf(unreported[i]);
      std::lock_guard<std::mutex> g(*lock);
      api::Error e = impl_->giveUp(unreported[i], b.node);
      if (i == 0) first = std::move(e);
    }
    return PreBindOutcome::done(api::makeError("Pod " + b.podKey + ": " + first.message));
  }
  auto pod = impl_->client.get(api::Kind::Pod, ns, name);
  if (!pod.ok())
    return PreBindOutcome::done(
        api::makeError("Pod " + b.podKey + ": reading it before binding: " + pod.error().message));
  if (!b.podUid.empty() && (*pod)["metadata"].value("uid", "") != b.podUid)
    return PreBindOutcome::done(api::makeError("Pod " + b.podKey + ": replaced (uid changed) before binding", 409));
  if (auto refused = impl_->checkDeviceRules(*pod, b, uuids)) return *refused;
  if (auto st = impl_->writeConfigMap(*pod, b.podKey, b.gpus, uuids, b.gpuCorePercent); !st.ok()) return PreBindOutcome::done(st);
  // Label last: a pod labelled with a group is one the group's garbage collection accounts for.
  std::string groups;
  for (const auto& a : b.gpus) groups += (groups.empty() ? "" : ",") + a.group;
  std::string uuidList;
  for (const auto& u : uuids) uuidList += (uuidList.empty() ? "" : ",") + u;
  cache::Json patch = {{"metadata",
                        {{"labels", {{api::keys::kGpuGroupLabel, b.gpus.front().group}}},
                         {"annotations",
                          {{api::keys::kGpuGroupsAnnotation, groups}, {api::keys::kGpuUuidAnnotation, uuidList}}}}}};
  // A size the pod got from the cluster's defaults becomes its own: it keeps it when the default
  // changes (its group's accounting reads the pod's annotations).
  if (b.defaultedMemoryMiB > 0)
    patch["metadata"]["annotations"][api::keys::kGpuMemory] = std::to_string(b.defaultedMemoryMiB);
  auto patched = impl_->client.patch(api::Kind::Pod, ns, name, cache::PatchType::Merge, patch);
  if (!patched.ok())
    return PreBindOutcome::done(api::makeError("Pod " + b.podKey + ": labelling it with GPU group " +
                                               b.gpus.front().group + ": " + patched.error().message));
  return PreBindOutcome::done();
}

void GpuBinding::collectGarbage(const cache::Snapshot& snap, const framework::SessionResult* decisions) {
  const api::Time now = impl_->clock.now();
  const auto& opts = impl_->options;
  std::vector<std::pair<std::string, std::string>> unused;  // group, reservation pod key
  std::set<std::string> orphanGroups;
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    if (decisions)
      for (const auto& b : decisions->binds)
        for (const auto& a : b.gpus) impl_->inflight[a.group] = Impl::Inflight{now, b.podKey, b.jobKey};
    for (const auto& n : snap.nodes)
      for (const cache::GpuGroupInfo& grp : n->gpuGroups) {
        auto in = impl_->inflight.find(grp.id);
        bool recent = false;
        if (in != impl_->inflight.end()) {
          // Protected while the cache may not show the pod in the group yet: until it does, or
          // the pod is gone or finished, or the grace ends (its bind failed).
          recent = now - in->second.since < opts.inflightGrace && !Impl::finished(snap, in->second);
        }
        if (grp.pods > 0) {
          if (grp.reserved && in != impl_->inflight.end()) impl_->inflight.erase(in);  // the cache caught up
          else if (!grp.reserved && !recent) orphanGroups.insert(grp.id);
          continue;
        }
        if (!grp.reserved) continue;
        if (recent) continue;  // a bind in flight: the cache may not show its pod yet
        if (in != impl_->inflight.end()) impl_->inflight.erase(in);
        unused.emplace_back(grp.id, grp.reservationPod);
      }
    // Forget in-flight groups long gone from every node (their bind failed).
    for (auto it = impl_->inflight.begin(); it != impl_->inflight.end();)
      it = (now - it->second.since).millis >= 2 * opts.inflightGrace.millis ? impl_->inflight.erase(it) : std::next(it);
  }
  for (const auto& [group, podKey] : unused) {
    auto [ns, name] = splitKey(podKey);
    cache::DeleteOptions del;
    del.gracePeriodSeconds = 0;
    auto st = impl_->client.remove(api::Kind::Pod, ns, name, del);
    if (st.ok() || st.error().code == 404) {
      log::info("deleted unused GPU reservation pod ", podKey, " (GPU group ", group, ")");
      std::lock_guard<std::mutex> g(impl_->mu);
      ++impl_->deleted;
      impl_->groupLocks.erase(group);
    } else {
      log::error("deleting unused GPU reservation pod ", podKey, ": ", st.error().message);
    }
  }
  if (orphanGroups.empty()) return;
  // Fractional pods running on a GPU whose reservation pod vanished: the GPU is no longer held
  // for them, and a whole-GPU pod may be given it by the device plugin.
  for (const auto& job : snap.jobs)
    for (const auto& t : job->tasks) {
      if (t.status != cache::TaskStatus::Running && t.status != cache::TaskStatus::Bound) continue;
      bool hit = false;
      for (const auto& id : t.gpuGroups) hit = hit || orphanGroups.count(id);
      if (!hit) continue;
      {
        std::lock_guard<std::mutex> g(impl_->mu);
        if (!impl_->reportedOrphans.insert(t.key).second) continue;
        ++impl_->orphans;
      }
      const std::string msg = "the GPU reservation pod of GPU group " + (t.gpuGroups.empty() ? "" : t.gpuGroups[0]) +
                              " on node " + t.nodeName + " is gone: the GPU is no longer reserved for this pod" +
                              (opts.evictOrphans ? "; evicting it" : "");
      impl_->event(t.key, t.uid, "Warning", "GpuReservationLost", msg);
      if (opts.evictOrphans) {
        auto [ns, name] = splitKey(t.key);
        cache::DeleteOptions del;
        del.preconditionUid = t.uid;
        (void)impl_->client.remove(api::Kind::Pod, ns, name, del);
      }
    }
}

uint64_t GpuBinding::deletedReservations() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->deleted;
}
uint64_t GpuBinding::orphansReported() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->orphans;
}

}  // namespace tessera::binder
