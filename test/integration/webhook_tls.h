#pragma once
// Test PKI and an HTTPS client for the webhook tests, with the OpenSSL C API (no `openssl` CLI):
// a throwaway CA, a server certificate it signs (subjectAltName DNS and IP entries), and a Beast
// client that trusts only a given CA and verifies the server's name or IP.
#include <cstdint>
#include <string>
#include <vector>

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
  bool ok = false;          ///< connected, TLS verified, answered
  std::string error;        ///< why not
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

}  // namespace tessera::testing
