#include "tessera/binder/events.h"

#include <atomic>
#include <cstdio>

namespace tessera::binder {

std::pair<std::string, std::string> splitKey(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

cache::Json makeEvent(api::Kind kind, const std::string& ns, const std::string& name, const std::string& uid,
                      const std::string& type, const std::string& reason, const std::string& message,
                      const std::string& component, api::Time now) {
  static std::atomic<uint64_t> counter{0};
  const api::KindInfo& ki = api::kindInfo(kind);
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".%llx.%llx", static_cast<unsigned long long>(now.unixMillis),
                static_cast<unsigned long long>(++counter));
  const std::string at = api::formatTime(now);
  return {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name + suffix}, {"namespace", ns.empty() ? "default" : ns}}},
      {"involvedObject",
       {{"apiVersion", ki.apiVersion()}, {"kind", std::string(ki.name)}, {"namespace", ns}, {"name", name}, {"uid", uid}}},
      {"reason", reason},
      {"message", message},
      {"type", type},
      {"source", {{"component", component}}},
      {"count", 1},
      {"firstTimestamp", at},
      {"lastTimestamp", at},
  };
}

}  // namespace tessera::binder
