// The monitor's Prometheus text, built per scrape with prometheus-cpp (as `tessera run` builds
// its own, src/app/run.cpp): a fresh registry holds the regions' values as read just now.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

#include "tessera/monitor/monitor.h"

namespace tessera::monitor {

std::string renderMetrics(const std::vector<PodRegion>& regions) {
  prometheus::Registry registry;
  auto& used = prometheus::BuildGauge()
                   .Name("tessera_gpu_memory_used_bytes")
                   .Help("GPU memory charged by the container's live processes (allocations and CUDA contexts)")
                   .Register(registry);
  auto& limit = prometheus::BuildGauge()
                    .Name("tessera_gpu_memory_limit_bytes")
                    .Help("The pod's GPU memory limit on this GPU, shared by all its containers")
                    .Register(registry);
  auto& refused = prometheus::BuildCounter()
                      .Name("tessera_gpu_alloc_refused_total")
                      .Help("GPU allocations refused with CUDA_ERROR_OUT_OF_MEMORY over the pod's limit")
                      .Register(registry);
  auto& processes = prometheus::BuildGauge()
                        .Name("tessera_gpu_processes")
                        .Help("The container's live processes holding memory on this GPU")
                        .Register(registry);
  for (const PodRegion& r : regions) {
    // A region written without the webhook's downward-API variables: the folder names the pod.
    const std::string pod = r.name.empty() ? r.dirName : r.name;
    for (const GpuState& g : r.gpus) {
      limit.Add({{"namespace", r.namespace_}, {"pod", pod}, {"uuid", g.uuid}}).Set(static_cast<double>(g.limit));
    }
    for (const ContainerGpu& c : r.containers) {
      const prometheus::Labels labels{
          {"namespace", r.namespace_}, {"pod", pod}, {"container", c.container}, {"uuid", r.gpus[c.gpu].uuid}};
      used.Add(labels).Set(static_cast<double>(c.used));
      processes.Add(labels).Set(c.processes);
      refused.Add(labels).Increment(static_cast<double>(c.refused));
    }
  }
  std::ostringstream os;
  prometheus::TextSerializer().Serialize(os, registry.Collect());
  return os.str();
}

}  // namespace tessera::monitor
