#pragma once
// The Pod Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
// as the PodSecurity admission controller applies them to a Pod, written out for tests: every
// rule of `baseline`, and what `restricted` adds. Each function returns the violations, one line
// each naming the rule and the field; empty means the pod passes. Containers are the containers,
// init containers and ephemeral containers.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::testing {

namespace pss_detail {

using Json = nlohmann::json;

inline const Json& at(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

inline std::string str(const Json& j) { return j.is_string() ? j.get<std::string>() : std::string(); }

/// (where, container) for every container of the pod: "spec.containers[0]" and so on.
inline std::vector<std::pair<std::string, const Json*>> containersOf(const Json& pod) {
  std::vector<std::pair<std::string, const Json*>> out;
  const Json& spec = at(pod, "spec");
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    const Json& cs = at(spec, list);
    if (!cs.is_array()) continue;
    for (size_t i = 0; i < cs.size(); ++i)
      out.emplace_back(std::string("spec.") + list + "[" + std::to_string(i) + "] " + str(at(cs[i], "name")), &cs[i]);
  }
  return out;
}

}  // namespace pss_detail

/// Violations of the `baseline` level: hostProcess, host namespaces, privileged, capabilities
/// added beyond the default set, hostPath volumes, hostPorts, AppArmor unconfined, SELinux
/// type/user/role, procMount, seccomp Unconfined, unsafe sysctls.
inline std::vector<std::string> baselineViolations(const nlohmann::json& pod) {
  using namespace pss_detail;
  static const std::set<std::string> kAllowedCaps = {"AUDIT_WRITE", "CHOWN",  "DAC_OVERRIDE",     "FOWNER",  "FSETID",
                                                     "KILL",        "MKNOD",  "NET_BIND_SERVICE", "SETFCAP", "SETGID",
                                                     "SETPCAP",     "SETUID", "SYS_CHROOT"};
  static const std::set<std::string> kSafeSysctls = {
      "kernel.shm_rmid_forced",       "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
      "net.ipv4.tcp_syncookies",      "net.ipv4.ping_group_range",    "net.ipv4.ip_local_reserved_ports",
      "net.ipv4.tcp_keepalive_time",  "net.ipv4.tcp_fin_timeout",     "net.ipv4.tcp_keepalive_intvl",
      "net.ipv4.tcp_keepalive_probes"};
  static const std::set<std::string> kSeLinuxTypes = {"", "container_t", "container_init_t", "container_kvm_t",
                                                      "container_engine_t"};
  std::vector<std::string> out;
  const Json& spec = at(pod, "spec");
  const Json& psc = at(spec, "securityContext");

  for (const char* ns : {"hostNetwork", "hostPID", "hostIPC"})
    if (at(spec, ns) == true) out.push_back(std::string("host namespaces: spec.") + ns + " is true");
  const Json& volumes = at(spec, "volumes");
  for (size_t i = 0; volumes.is_array() && i < volumes.size(); ++i)
    if (!at(volumes[i], "hostPath").is_null())
      out.push_back("hostPath volumes: spec.volumes[" + std::to_string(i) + "] " + str(at(volumes[i], "name")));
  const Json& sysctls = at(psc, "sysctls");
  for (size_t i = 0; sysctls.is_array() && i < sysctls.size(); ++i)
    if (!kSafeSysctls.count(str(at(sysctls[i], "name"))))
      out.push_back("sysctls: spec.securityContext.sysctls " + str(at(sysctls[i], "name")) + " is not safe");
  const Json& annotations = at(at(pod, "metadata"), "annotations");
  if (annotations.is_object())
    for (const auto& [key, value] : annotations.items())
      if (key.rfind("container.apparmor.security.beta.kubernetes.io/", 0) == 0) {
        const std::string v = str(value);
        if (v != "runtime/default" && v.rfind("localhost/", 0) != 0)
          out.push_back("AppArmor: annotation " + key + "=" + v);
      }

  // Rules that apply to the pod's securityContext and to every container's.
  auto common = [&](const std::string& where, const Json& sc) {
    if (at(at(sc, "windowsOptions"), "hostProcess") == true)
      out.push_back("hostProcess: " + where + ".windowsOptions.hostProcess is true");
    const std::string seccomp = str(at(at(sc, "seccompProfile"), "type"));
    if (seccomp == "Unconfined") out.push_back("seccomp: " + where + ".seccompProfile.type is Unconfined");
    const std::string apparmor = str(at(at(sc, "appArmorProfile"), "type"));
    if (!apparmor.empty() && apparmor != "RuntimeDefault" && apparmor != "Localhost")
      out.push_back("AppArmor: " + where + ".appArmorProfile.type is " + apparmor);
    const Json& se = at(sc, "seLinuxOptions");
    if (!kSeLinuxTypes.count(str(at(se, "type"))))
      out.push_back("SELinux: " + where + ".seLinuxOptions.type is " + str(at(se, "type")));
    if (!str(at(se, "user")).empty() || !str(at(se, "role")).empty())
      out.push_back("SELinux: " + where + ".seLinuxOptions sets user or role");
  };
  common("spec.securityContext", psc);
  for (const auto& [where, c] : containersOf(pod)) {
    const Json& sc = at(*c, "securityContext");
    common(where + " securityContext", sc);
    if (at(sc, "privileged") == true) out.push_back("privileged: " + where + " securityContext.privileged is true");
    const Json& add = at(at(sc, "capabilities"), "add");
    for (size_t i = 0; add.is_array() && i < add.size(); ++i)
      if (!kAllowedCaps.count(str(add[i]))) out.push_back("capabilities: " + where + " adds " + str(add[i]));
    const std::string proc = str(at(sc, "procMount"));
    if (!proc.empty() && proc != "Default")
      out.push_back("procMount: " + where + " securityContext.procMount is " + proc);
    const Json& ports = at(*c, "ports");
    for (size_t i = 0; ports.is_array() && i < ports.size(); ++i)
      if (at(ports[i], "hostPort").is_number() && at(ports[i], "hostPort").get<int64_t>() != 0)
        out.push_back("hostPorts: " + where + " ports[" + std::to_string(i) + "].hostPort is " +
                      at(ports[i], "hostPort").dump());
  }
  return out;
}

/// Violations of the `restricted` level: those of `baseline`, and volume types beyond the allowed
/// list, allowPrivilegeEscalation not false, runAsNonRoot not true, runAsUser 0, seccomp neither
/// RuntimeDefault nor Localhost, capabilities not dropping ALL or adding more than
/// NET_BIND_SERVICE.
inline std::vector<std::string> restrictedViolations(const nlohmann::json& pod) {
  using namespace pss_detail;
  static const std::set<std::string> kVolumeTypes = {
      "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"};
  std::vector<std::string> out = baselineViolations(pod);
  const Json& spec = at(pod, "spec");
  const Json& psc = at(spec, "securityContext");
  const Json& volumes = at(spec, "volumes");
  for (size_t i = 0; volumes.is_array() && i < volumes.size(); ++i)
    for (const auto& [key, value] : volumes[i].items())
      if (key != "name" && !kVolumeTypes.count(key))
        out.push_back("volume types: spec.volumes[" + std::to_string(i) + "] " + str(at(volumes[i], "name")) + " is " +
                      key);
  if (at(psc, "runAsUser") == 0) out.push_back("runAsUser: spec.securityContext.runAsUser is 0");
  if (at(psc, "runAsNonRoot") == false) out.push_back("runAsNonRoot: spec.securityContext.runAsNonRoot is false");
  const std::string podSeccomp = str(at(at(psc, "seccompProfile"), "type"));
  for (const auto& [where, c] : containersOf(pod)) {
    const Json& sc = at(*c, "securityContext");
    if (at(sc, "allowPrivilegeEscalation") != false)
      out.push_back("allowPrivilegeEscalation: " + where + " does not set it to false");
    const Json& nonRoot = at(sc, "runAsNonRoot");
    if (nonRoot == false || (nonRoot.is_null() && at(psc, "runAsNonRoot") != true))
      out.push_back("runAsNonRoot: " + where + " does not run as non-root (neither it nor the pod sets true)");
    if (at(sc, "runAsUser") == 0) out.push_back("runAsUser: " + where + " securityContext.runAsUser is 0");
    std::string seccomp = str(at(at(sc, "seccompProfile"), "type"));
    if (seccomp.empty()) seccomp = podSeccomp;
    if (seccomp != "RuntimeDefault" && seccomp != "Localhost")
      out.push_back("seccomp: " + where + " has no RuntimeDefault or Localhost profile (nor the pod)");
    const Json& caps = at(sc, "capabilities");
    const Json& drop = at(caps, "drop");
    if (!drop.is_array() || std::find(drop.begin(), drop.end(), Json("ALL")) == drop.end())
      out.push_back("capabilities: " + where + " does not drop ALL");
    const Json& add = at(caps, "add");
    for (size_t i = 0; add.is_array() && i < add.size(); ++i)
      if (str(add[i]) != "NET_BIND_SERVICE") out.push_back("capabilities: " + where + " adds " + str(add[i]));
  }
  return out;
}

}  // namespace tessera::testing
