#include "tessera/binder/events.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "tessera/api/text.h"

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
  // An Event's name is a DNS subdomain of at most 253 characters: a long object name is cut (at an
  // alphanumeric character) to leave room for the suffix.
  std::string base = name.substr(0, std::min(name.size(), 253 - std::strlen(suffix)));
  while (!base.empty() && !std::isalnum(static_cast<unsigned char>(base.back()))) base.pop_back();
  return {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", base + suffix}, {"namespace", ns.empty() ? "default" : ns}}},
      {"involvedObject",
       {{"apiVersion", ki.apiVersion()}, {"kind", std::string(ki.name)}, {"namespace", ns}, {"name", name}, {"uid", uid}}},
      {"reason", reason},
      {"message", api::validUtf8(message)},  // it may quote a user's bytes: JSON must be UTF-8
      {"type", type},
      {"source", {{"component", component}}},
      {"count", 1},
      {"firstTimestamp", at},
      {"lastTimestamp", at},
  };
}

}  // namespace tessera::binder
