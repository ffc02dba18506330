// `tessera reserve`: find the GPU (nvml.cpp), write it to the pod's annotations with a merge patch
// through the ClusterClient, wait for SIGTERM. Transient API failures are retried (with backoff,
// interruptible by SIGTERM); refusals that retrying cannot fix (401, 403, 404, 422) exit 1 with the
// reason, so the pod's log and restart count show it.
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <pthread.h>

#include "tessera/api/flags.h"
#include "tessera/api/signals.h"
#include "tessera/api/objects.h"
#include "tessera/cache/http_client.h"
#include "tessera/reserve/reserve.h"

namespace tessera::reserve {

namespace {

const char* const kUsage =
    "usage: tessera reserve [--kubeconfig PATH [--context NAME]] [--pod-name NAME] [--pod-namespace NS]\n"
    "                       [--nvml-library libnvidia-ml.so.1]\n"
    "  In a pod: POD_NAME and POD_NAMESPACE from the downward API, the service account's token.\n";

struct Flags {
  std::string kubeconfig, context, podName, podNamespace;
  std::string nvmlLibrary = "libnvidia-ml.so.1";
};

api::Result<Flags> parseFlags(const std::vector<std::string>& args) {
  Flags f;
  if (const char* v = std::getenv("POD_NAME")) f.podName = v;
  if (const char* v = std::getenv("POD_NAMESPACE")) f.podNamespace = v;
  api::FlagCursor flag(args);
  while (flag.next()) {
    const std::string& a = flag.name();
    if (a == "--help" || a == "-h") return api::makeError("", 1);
    TESSERA_ASSIGN_OR_RETURN(const std::string v, flag.value());
    if (a == "--kubeconfig") f.kubeconfig = v;
    else if (a == "--context") f.context = v;
    else if (a == "--pod-name") f.podName = v;
    else if (a == "--pod-namespace") f.podNamespace = v;
    else if (a == "--nvml-library") f.nvmlLibrary = v;
    else return api::makeError("unknown flag " + a);
  }
  if (f.podName.empty())
    return api::makeError("the pod's name is unknown: set POD_NAME (downward API metadata.name) or --pod-name");
  if (f.podNamespace.empty())
    return api::makeError(
        "the pod's namespace is unknown: set POD_NAMESPACE (downward API metadata.namespace) or --pod-namespace");
  return f;
}

}  // namespace

int reserveCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto flags = parseFlags(args);
  if (!flags.ok()) {
    if (flags.error().code == 1) {
      out << kUsage;
      return 0;
    }
    err << "tessera reserve: " << flags.error().message << "\n" << kUsage;
    return 2;
  }
  const Flags& f = *flags;
  // Before the HTTP client starts its threads: only sigwait takes the termination signals.
  api::blockTerminationSignals();
  const std::string pod = f.podNamespace + "/" + f.podName;

  const char* visible = std::getenv("NVIDIA_VISIBLE_DEVICES");
  auto gpu = findGpu(f.nvmlLibrary, visible ? visible : "");
  if (!gpu.ok()) {
    err << "tessera reserve: pod " << pod << ": " << gpu.error().message << "\n";
    return 1;
  }
  const uint64_t mib = gpu->memoryBytes >> 20;
  out << "tessera reserve: pod " << pod << " holds GPU " << gpu->uuid << " (NVML index " << gpu->index << " of "
      << gpu->visible << ", " << mib << " MiB)\n"
      << std::flush;

  auto rc = f.kubeconfig.empty() ? cache::inClusterConfig() : cache::loadKubeconfig(f.kubeconfig, f.context);
  if (!rc.ok()) {
    err << "tessera reserve: " << rc.error().message << "\n";
    return 1;
  }
  cache::HttpClientOptions co;
  co.qps = 5;
  co.burst = 10;
  co.ioThreads = 1;
  auto client = cache::makeHttpClient(*rc, co);
  if (!client.ok()) {
    err << "tessera reserve: " << client.error().message << "\n";
    return 1;
  }
  const cache::Json patch = {
      {"metadata",
       {{"annotations",
         {{api::keys::kGpuUuidAnnotation, gpu->uuid}, {kGpuMemoryMiBAnnotation, std::to_string(mib)}}}}}};
  for (int64_t backoff = 500;; backoff = std::min<int64_t>(backoff * 2, 30'000)) {
    auto r = (*client)->patch(api::Kind::Pod, f.podNamespace, f.podName, cache::PatchType::Merge, patch);
    if (r.ok()) break;
    const int code = r.error().code;
    err << "tessera reserve: annotating pod " << pod << ": " << r.error().message << "\n" << std::flush;
    if (code == 401 || code == 403 || code == 404 || code == 422) return 1;
    if (int sig = api::waitForTerminationSignal(backoff); sig > 0) {
      err << "tessera reserve: signal " << sig << " before the pod was annotated\n";
      return 0;
    }
  }
  out << "tessera reserve: annotated pod " << pod << " with " << api::keys::kGpuUuidAnnotation << "=" << gpu->uuid
      << "; waiting for SIGTERM\n"
      << std::flush;
  const int sig = api::waitForTerminationSignal(-1);
  out << "tessera reserve: signal " << sig << ", exiting\n" << std::flush;
  return 0;
}

}  // namespace tessera::reserve
