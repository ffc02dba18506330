#pragma once
// Test PKI and an HTTPS client for the webhook tests, with the OpenSSL C API (no `openssl` CLI):
// a throwaway CA, a server certificate it signs (subjectAltName DNS and IP entries), and a Beast
// client that trusts only a given CA and verifies the server's name or IP.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::testing {

struct TestPki {
  std::string caCertPem;
  std::string caKeyPem;
  std::string serverCertPem;
  std::string serverKeyPem;
};

/// A fresh CA ("tessera test CA <serial>") and a server certificate signed by it, valid for the
/// given DNS names and IP addresses (subjectAltName), EC P-256 keys, SHA-256, valid one day.
TestPki makeTestPki(const std::vector<std::string>& dnsNames, const std::vector<std::string>& ips, long serial = 1);

/// Writes `content` to `path` atomically (temporary file + rename), as a Secret volume update does.
void writeFileAtomically(const std::string& path, const std::string& content);

struct HttpsResult {
  bool ok = false;    ///< connected, TLS verified, answered
  std::string error;  ///< why not
  int status = 0;
  std::string body;
  std::string peerSubject;  ///< the server certificate's subject, one line
};

/// One request over a fresh TLS connection to 127.0.0.1:`port`, trusting only `caPem`. `verifyName`
/// is the name (or IP address) the certificate must carry. `requests` > 1 sends the same request
/// again on the same (kept-alive) connection and returns the last answer.
HttpsResult httpsRequest(uint16_t port, const std::string& caPem, const std::string& verifyName,
                         const std::string& method, const std::string& target, const std::string& body,
                         int requests = 1);

/// Standard base64 decoding (the AdmissionResponse's patch field).
std::string base64Decode(const std::string& text);

/// An AdmissionReview v1 of a Pod CREATE in `ns` (the request's namespace) with `uid`.
std::string podCreateReview(const nlohmann::json& pod, const std::string& ns, const std::string& uid);

/// Sends `pod` to the webhook's /mutate on 127.0.0.1:`port` (trusting `caPem`, verifying
/// 127.0.0.1) and returns the pod with the returned JSONPatch applied, as the API server would
/// store it. Throws std::runtime_error (with the answer) when the request fails or is refused.
nlohmann::json admitPod(uint16_t port, const std::string& caPem, const nlohmann::json& pod, const std::string& ns);

}  // namespace tessera::testing
