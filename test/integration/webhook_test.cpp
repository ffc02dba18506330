// `tessera webhook` over real HTTPS: a test CA and server certificate made at test time (OpenSSL C
// API), the server in-process on 127.0.0.1 port 0, a Beast client that trusts only the test CA and
// verifies the IP or name. Mutation and validation answers, malformed reviews, certificate
// rotation, and the `tessera webhook` subcommand as a child process.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <regex>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "support/daemon_process.h"
#include "tessera/webhook/server.h"
#include "webhook_tls.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace tessera;
using testing::base64Decode;
using testing::httpsRequest;
using testing::makeTestPki;

fs::path tempDir() { return testing::scratchDir("tessera-webhook-it"); }

json fractionPod(const std::string& fraction) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"generateName", "nb-"}, {"namespace", "ml"}, {"annotations", {{"gpu-fraction", fraction}}}}},
          {"spec", {{"schedulerName", "tessera"}, {"containers", {{{"name", "main"}, {"image", "pytorch"}}}}}}};
}

std::string admissionReview(const json& pod, const std::string& uid) {
  return testing::podCreateReview(pod, "ml", uid);
}

/// Cert and key files for `pki` under a name.
struct Files {
  std::string cert, key;
};
Files writePki(const testing::TestPki& pki, const std::string& name) {
  Files f{(tempDir() / (name + ".crt")).string(), (tempDir() / (name + ".key")).string()};
  testing::writeFileAtomically(f.cert, pki.serverCertPem);
  testing::writeFileAtomically(f.key, pki.serverKeyPem);
  return f;
}

webhook::ServerOptions serverOptions(const Files& f) {
  webhook::ServerOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.certFile = f.cert;
  o.keyFile = f.key;
  o.suffix = [] { return std::string("abcde"); };
  return o;
}

}  // namespace

TEST_CASE("webhook over HTTPS: mutate and validate with a client that trusts only the test CA") {
  const auto pki = makeTestPki({"localhost", "tessera-webhook.tessera-system.svc"}, {"127.0.0.1"});
  const Files files = writePki(pki, "main");
  std::vector<std::string> logLines;
  std::mutex logMu;
  webhook::ServerOptions o = serverOptions(files);
  o.log = [&](const std::string& l) {
    std::lock_guard lock(logMu);
    logLines.push_back(l);
  };
  webhook::Server server(o);
  auto port = server.start();
  REQUIRE(port.ok());
  REQUIRE(*port != 0);
  CHECK(server.port() == *port);

  SECTION("mutate: the patch wires the ConfigMap and the interposer") {
    auto r = httpsRequest(*port, pki.caCertPem, "127.0.0.1", "POST", "/mutate",
                          admissionReview(fractionPod("0.5"), "uid-1"));
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.status == 200);
    CHECK(r.peerSubject == "/CN=tessera-webhook 1");
    json res = json::parse(r.body)["response"];
    CHECK(res["uid"] == "uid-1");
    CHECK(res["allowed"] == true);
    REQUIRE(res["patchType"] == "JSONPatch");
    json pod = fractionPod("0.5").patch(json::parse(base64Decode(res["patch"])));
    CHECK(pod["metadata"]["annotations"]["tessera.dev/gpu-configmap"] == "nb-abcde-tessera-gpu");
    CHECK(pod["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"] == "nb-abcde-tessera-gpu");
    CHECK(pod["spec"]["volumes"][0] == json{{"name", "tessera-interposer"}, {"emptyDir", json::object()}});
    CHECK(pod["spec"]["initContainers"][0]["name"] == "tessera-interposer");
    {
      std::lock_guard lock(logMu);
      REQUIRE_FALSE(logLines.empty());
      CHECK(logLines.back() == "mutate CREATE Pod ml/nb-*: allowed, patched");
    }
    // The helper the end-to-end test uses gives the same pod.
    CHECK(testing::admitPod(*port, pki.caCertPem, fractionPod("0.5"), "ml") == pod);
    CHECK_THROWS_WITH(testing::admitPod(*port, pki.caCertPem, fractionPod("2"), "ml"),
                      Catch::Contains("webhook refused the pod"));
  }
  SECTION("validate: a bad fraction is refused, naming the key; keep-alive serves several reviews") {
    auto r = httpsRequest(*port, pki.caCertPem, "127.0.0.1", "POST", "/validate",
                          admissionReview(fractionPod("1.5"), "uid-2"), 3);
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.status == 200);
    json res = json::parse(r.body)["response"];
    CHECK(res["uid"] == "uid-2");
    CHECK(res["allowed"] == false);
    CHECK(res["status"]["code"] == 422);
    CHECK(res["status"]["message"].get<std::string>().rfind("annotation gpu-fraction: \"1.5\"", 0) == 0);
  }
  SECTION("malformed reviews get 400 with a message; the server goes on") {
    auto r = httpsRequest(*port, pki.caCertPem, "127.0.0.1", "POST", "/mutate", "{not json");
    REQUIRE(r.ok);
    CHECK(r.status == 400);
    CHECK(r.body == "malformed AdmissionReview: the body is not valid JSON\n");
    auto h = httpsRequest(*port, pki.caCertPem, "127.0.0.1", "GET", "/healthz", "");
    REQUIRE(h.ok);
    CHECK(h.status == 200);
  }
  SECTION("the certificate is verified by DNS name too; a wrong name or another CA is refused") {
    auto byName = httpsRequest(*port, pki.caCertPem, "localhost", "GET", "/healthz", "");
    INFO(byName.error);
    CHECK(byName.ok);
    auto svc = httpsRequest(*port, pki.caCertPem, "tessera-webhook.tessera-system.svc", "GET", "/healthz", "");
    CHECK(svc.ok);
    auto wrongName = httpsRequest(*port, pki.caCertPem, "evil.example", "GET", "/healthz", "");
    CHECK_FALSE(wrongName.ok);
    auto wrongIp = httpsRequest(*port, pki.caCertPem, "127.0.0.2", "GET", "/healthz", "");
    CHECK_FALSE(wrongIp.ok);
    const auto other = makeTestPki({"localhost"}, {"127.0.0.1"}, 7);
    auto otherCa = httpsRequest(*port, other.caCertPem, "127.0.0.1", "GET", "/healthz", "");
    CHECK_FALSE(otherCa.ok);
    // The refused handshakes did not hurt the server.
    CHECK(httpsRequest(*port, pki.caCertPem, "127.0.0.1", "GET", "/healthz", "").ok);
  }
  server.stop();
  server.stop();  // idempotent
}

TEST_CASE("webhook over HTTPS: body limit, bad certificate files") {
  const auto pki = makeTestPki({"localhost"}, {"127.0.0.1"}, 3);
  const Files files = writePki(pki, "limits");
  webhook::ServerOptions o = serverOptions(files);
  o.maxBodyBytes = 1024;
  webhook::Server server(o);
  auto port = server.start();
  REQUIRE(port.ok());
  auto big = httpsRequest(*port, pki.caCertPem, "127.0.0.1", "POST", "/mutate", std::string(4096, ' '));
  REQUIRE(big.ok);
  CHECK(big.status == 413);
  server.stop();

  webhook::ServerOptions missing = serverOptions({(tempDir() / "nope.crt").string(), files.key});
  auto st = webhook::Server(missing).start();
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "--tls-cert-file " + (tempDir() / "nope.crt").string() + ": cannot open the file");

  const auto other = makeTestPki({"localhost"}, {"127.0.0.1"}, 5);
  const std::string otherKey = (tempDir() / "other.key").string();
  testing::writeFileAtomically(otherKey, other.serverKeyPem);
  auto mismatch = webhook::Server(serverOptions({files.cert, otherKey})).start();
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.error().message ==
        "--tls-key-file " + otherKey + ": the key does not match the certificate in " + files.cert);

  const std::string notKey = (tempDir() / "notkey.key").string();
  testing::writeFileAtomically(notKey, pki.serverCertPem);
  auto noKey = webhook::Server(serverOptions({files.cert, notKey})).start();
  REQUIRE_FALSE(noKey.ok());
  CHECK(noKey.error().message == "--tls-key-file " + notKey + ": not a PEM private key");

  const std::string garbage = (tempDir() / "garbage.crt").string();
  testing::writeFileAtomically(garbage, "not a certificate\n");
  auto bad = webhook::Server(serverOptions({garbage, files.key})).start();
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.rfind("--tls-cert-file " + garbage + ": not a PEM certificate chain", 0) == 0);
}

TEST_CASE("webhook over HTTPS: certificate rotation is picked up by new connections") {
  const auto first = makeTestPki({"localhost"}, {"127.0.0.1"}, 11);
  const Files files = writePki(first, "rotating");
  webhook::Server server(serverOptions(files));
  auto port = server.start();
  REQUIRE(port.ok());
  CHECK(httpsRequest(*port, first.caCertPem, "127.0.0.1", "GET", "/healthz", "").ok);

  // A half-written rotation (new cert, old key) is not taken: the old pair keeps serving.
  const auto second = makeTestPki({"localhost"}, {"127.0.0.1"}, 22);
  testing::writeFileAtomically(files.cert, second.serverCertPem);
  auto during = httpsRequest(*port, first.caCertPem, "127.0.0.1", "GET", "/healthz", "");
  INFO(during.error);
  CHECK(during.ok);
  CHECK(during.peerSubject == "/CN=tessera-webhook 11");
  CHECK(server.certificateReloads() == 0);

  // The key follows: new connections get the new certificate, the old CA no longer verifies it.
  testing::writeFileAtomically(files.key, second.serverKeyPem);
  auto after = httpsRequest(*port, second.caCertPem, "127.0.0.1", "GET", "/healthz", "");
  INFO(after.error);
  REQUIRE(after.ok);
  CHECK(after.peerSubject == "/CN=tessera-webhook 22");
  CHECK(server.certificateReloads() == 1);
  CHECK_FALSE(httpsRequest(*port, first.caCertPem, "127.0.0.1", "GET", "/healthz", "").ok);
  server.stop();
}

TEST_CASE("tessera webhook: the subcommand serves until SIGTERM and exits 0") {
  const auto pki = makeTestPki({"localhost"}, {"127.0.0.1"}, 31);
  const Files files = writePki(pki, "cli");
  const std::string log = (tempDir() / "webhook-cli.log").string();
  // The log is written afresh by each run.
  auto spawn = [&](std::vector<std::string> a) {
    a.insert(a.begin(), {TESSERA_BINARY, "webhook"});
    fs::remove(log);
    return testing::ChildProcess(std::move(a), log);
  };
  auto p = spawn({"--tls-cert-file", files.cert, "--tls-key-file", files.key, "--port", "0", "--address", "127.0.0.1",
                  "--isolation", "mps"});
  // Wait for the "serving" line (polling; the deadline only guards against a hang).
  std::smatch m;
  std::string text;
  const std::regex serving("serving https://127\\.0\\.0\\.1:([0-9]+)");
  testing::eventually(
      [&] {
        text = p.log();
        return std::regex_search(text, m, serving);
      },
      30, 10);
  INFO(text);
  REQUIRE(std::regex_search(text, m, serving));
  const auto port = static_cast<uint16_t>(std::stoi(m[1]));
  auto r = httpsRequest(port, pki.caCertPem, "127.0.0.1", "POST", "/mutate", admissionReview(fractionPod("0.25"), "u"));
  INFO(r.error);
  REQUIRE(r.ok);
  json res = json::parse(r.body)["response"];
  REQUIRE(res["allowed"] == true);
  const std::string patch = base64Decode(res["patch"]);
  CHECK(patch.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") != std::string::npos);
  const int status = p.kill(SIGTERM);
  REQUIRE(status != -1);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  // Bad flags: exit 2 with the usage; unreadable files: exit 1 naming the file.
  std::string output;
  auto run = [&](std::vector<std::string> a) {
    auto c = spawn(std::move(a));
    const int st = c.wait();
    output = c.log();
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  CHECK(run({"--isolation", "soft", "--tls-cert-file", files.cert, "--tls-key-file", files.key}) == 2);
  CHECK(output.find("--isolation: \"soft\" is not a backend (valid: hard, mps, none)") != std::string::npos);
  CHECK(run({"--tls-cert-file", "/nonexistent/tls.crt", "--tls-key-file", files.key, "--port", "0"}) == 1);
  CHECK(output.find("--tls-cert-file /nonexistent/tls.crt: cannot open the file") != std::string::npos);
}
