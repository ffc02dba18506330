#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tessera/cache/http_client.h"

using namespace tessera::cache;

namespace {
// "hello" / "key" in base64.
const char* kConfig = R"(
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: prod
  cluster:
    server: https://prod.example:6443
    certificate-authority-data: aGVsbG8=
- name: local
  cluster:
    server: http://127.0.0.1:8080
    insecure-skip-tls-verify: true
contexts:
- name: dev
  context: {cluster: local, user: alice}
- name: prod
  context: {cluster: prod, user: bot}
- name: plugin
  context: {cluster: prod, user: gke}
users:
- name: alice
  user: {token: abc123}
- name: bot
  user:
    client-certificate-data: aGVsbG8=
    client-key-data: a2V5
- name: gke
  user:
    exec: {command: gke-gcloud-auth-plugin, apiVersion: client.authentication.k8s.io/v1beta1}
)";
}  // namespace

TEST_CASE("kubeconfig: current context, token, insecure") {
  auto rc = parseKubeconfig(kConfig, "");
  REQUIRE(rc.ok());
  CHECK(rc->server == "http://127.0.0.1:8080");
  CHECK(rc->token == "abc123");
  CHECK(rc->insecureSkipTlsVerify);
  CHECK(rc->caData.empty());
}

TEST_CASE("kubeconfig: --context, base64 data fields") {
  auto rc = parseKubeconfig(kConfig, "", "prod");
  REQUIRE(rc.ok());
  CHECK(rc->server == "https://prod.example:6443");
  CHECK(rc->caData == "hello");
  CHECK(rc->clientCertData == "hello");
  CHECK(rc->clientKeyData == "key");
  CHECK(!rc->insecureSkipTlsVerify);
}

TEST_CASE("kubeconfig: exec plugins and unknown contexts are clear errors") {
  auto rc = parseKubeconfig(kConfig, "", "plugin");
  REQUIRE(!rc.ok());
  CHECK(rc.error().message.find("users[gke].user.exec") != std::string::npos);
  CHECK(rc.error().message.find("not supported") != std::string::npos);
  auto missing = parseKubeconfig(kConfig, "", "nope");
  REQUIRE(!missing.ok());
  CHECK(missing.error().message.find("context \"nope\" not found") != std::string::npos);
}

TEST_CASE("kubeconfig: file references resolve against the kubeconfig's folder") {
  auto dir = std::filesystem::temp_directory_path() / ("tessera-kc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ca.pem") << "CA";
  std::ofstream(dir / "token") << "tok\n";
  std::ofstream(dir / "config") << "current-context: c\n"
                                   "clusters: [{name: k, cluster: {server: 'https://h:1', certificate-authority: ca.pem}}]\n"
                                   "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                                   "users: [{name: u, user: {tokenFile: token}}]\n";
  auto rc = loadKubeconfig((dir / "config").string());
  REQUIRE(rc.ok());
  CHECK(rc->caData == "CA");
  CHECK(rc->tokenFile == (dir / "token").string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("in-cluster config needs the service environment") {
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto rc = inClusterConfig("/nonexistent");
  REQUIRE(!rc.ok());
  CHECK(rc.error().message.find("KUBERNETES_SERVICE_HOST") != std::string::npos);
}
