// kubeconfig and in-cluster configuration: where the API server is and how to authenticate.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/api/convert.h"
#include "tessera/cache/http_client.h"

namespace tessera::cache {

namespace {

api::Result<std::string> readFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return api::makeError(what + ": cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

api::Result<std::string> base64Decode(const std::string& in, const std::string& what) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  int bits = 0, acc = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    int v = val(c);
    if (v < 0) return api::makeError(what + ": not valid base64");
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

const Json* named(const Json& doc, const char* list, const std::string& name, const char* inner) {
  if (!doc.contains(list) || !doc[list].is_array()) return nullptr;
  for (const auto& e : doc[list]) {
    if (e.is_object() && e.value("name", "") == name && e.contains(inner) && e[inner].is_object()) return &e[inner];
  }
  return nullptr;
}

std::string str(const Json& o, const char* key) {
  return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
}

/// A `*-data` field (base64) or its file twin (path, relative to the kubeconfig's folder).
api::Status pem(const Json& o, const char* dataKey, const char* fileKey, const std::string& baseDir,
                const std::string& where, std::string& out) {
  if (auto d = str(o, dataKey); !d.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out, base64Decode(d, where + "." + dataKey));
    return api::Status::success();
  }
  if (auto f = str(o, fileKey); !f.empty()) {
    std::filesystem::path p(f);
    if (p.is_relative() && !baseDir.empty()) p = std::filesystem::path(baseDir) / p;
    TESSERA_ASSIGN_OR_RETURN(out, readFile(p.string(), where + "." + fileKey));
  }
  return api::Status::success();
}

}  // namespace

api::Result<RestConfig> parseKubeconfig(const std::string& yamlText, const std::string& baseDir,
                                        const std::string& context) {
  auto docs = api::yamlToJson(yamlText);
  if (!docs.ok()) return api::makeError("kubeconfig: " + docs.error().message);
  if (docs->empty() || !docs->front().is_object()) return api::makeError("kubeconfig: not a map");
  const Json& doc = docs->front();
  std::string ctxName = context.empty() ? str(doc, "current-context") : context;
  if (ctxName.empty()) return api::makeError("kubeconfig: no current-context (pass --context)");
  const Json* ctx = named(doc, "contexts", ctxName, "context");
  if (!ctx) return api::makeError("kubeconfig: context \"" + ctxName + "\" not found");
  const std::string clusterName = str(*ctx, "cluster"), userName = str(*ctx, "user");
  const Json* cluster = named(doc, "clusters", clusterName, "cluster");
  if (!cluster) return api::makeError("kubeconfig: cluster \"" + clusterName + "\" (of context " + ctxName + ") not found");

  RestConfig rc;
  rc.server = str(*cluster, "server");
  if (rc.server.empty()) return api::makeError("kubeconfig: clusters[" + clusterName + "].cluster.server: required");
  rc.insecureSkipTlsVerify = cluster->value("insecure-skip-tls-verify", false);
  rc.tlsServerName = str(*cluster, "tls-server-name");
  const std::string cw = "clusters[" + clusterName + "].cluster";
  TESSERA_TRY(pem(*cluster, "certificate-authority-data", "certificate-authority", baseDir, cw, rc.caData));

  if (userName.empty()) return rc;  // anonymous
  const Json* user = named(doc, "users", userName, "user");
  if (!user) return api::makeError("kubeconfig: user \"" + userName + "\" (of context " + ctxName + ") not found");
  const std::string uw = "users[" + userName + "].user";
  if (user->contains("exec"))
    return api::makeError("kubeconfig: " + uw + ".exec: exec credential plugins are not supported by tessera; "
                          "use a token, tokenFile or client certificate (a ServiceAccount token works)");
  if (user->contains("auth-provider"))
    return api::makeError("kubeconfig: " + uw + ".auth-provider: auth provider plugins are not supported by tessera; "
                          "use a token, tokenFile or client certificate");
  if (user->contains("username") || user->contains("password"))
    return api::makeError("kubeconfig: " + uw + ".username/password: basic auth is not supported; use a token");
  rc.token = str(*user, "token");
  if (auto f = str(*user, "tokenFile"); !f.empty()) {
    std::filesystem::path p(f);
    if (p.is_relative() && !baseDir.empty()) p = std::filesystem::path(baseDir) / p;
    rc.tokenFile = p.string();
  }
  TESSERA_TRY(pem(*user, "client-certificate-data", "client-certificate", baseDir, uw, rc.clientCertData));
  TESSERA_TRY(pem(*user, "client-key-data", "client-key", baseDir, uw, rc.clientKeyData));
  if (rc.clientCertData.empty() != rc.clientKeyData.empty())
    return api::makeError("kubeconfig: " + uw + ": a client certificate needs its key and the other way round");
  return rc;
}

api::Result<RestConfig> loadKubeconfig(const std::string& path, const std::string& context) {
  TESSERA_ASSIGN_OR_RETURN(const std::string text, readFile(path, "kubeconfig"));
  return parseKubeconfig(text, std::filesystem::path(path).parent_path().string(), context);
}

api::Result<RestConfig> inClusterConfig(const std::string& secretsDir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port)
    return api::makeError("in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
                          "(is tessera running in a pod?)");
  RestConfig rc;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  rc.server = "https://" + h + ":" + port;
  rc.tokenFile = secretsDir + "/token";
  if (!std::filesystem::exists(rc.tokenFile)) return api::makeError("in-cluster config: no token at " + rc.tokenFile);
  TESSERA_ASSIGN_OR_RETURN(rc.caData, readFile(secretsDir + "/ca.crt", "in-cluster config"));
  return rc;
}

}  // namespace tessera::cache
