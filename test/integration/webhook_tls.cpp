// See webhook_tls.h. OpenSSL 3 API; every object is freed by a unique_ptr with its free function.
#include "webhook_tls.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace tessera::testing {

namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test PKI: ") + what + " failed");
}

PkeyPtr newKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  check(key != nullptr, "EVP_EC_gen");
  return key;
}

void addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "X509V3_EXT_conf_nid");
  check(X509_add_ext(cert, ext, -1) == 1, "X509_add_ext");
  X509_EXTENSION_free(ext);
}

X509Ptr newCert(EVP_PKEY* key, const std::string& cn, long serial, X509* issuer, EVP_PKEY* issuerKey, bool ca,
                const std::string& san) {
  X509Ptr cert(X509_new());
  check(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509* iss = issuer ? issuer : cert.get();
  if (ca) {
    addExtension(cert.get(), iss, NID_basic_constraints, "critical,CA:TRUE");
    addExtension(cert.get(), iss, NID_key_usage, "critical,keyCertSign,cRLSign");
    addExtension(cert.get(), iss, NID_subject_key_identifier, "hash");
  } else {
    addExtension(cert.get(), iss, NID_basic_constraints, "critical,CA:FALSE");
    addExtension(cert.get(), iss, NID_key_usage, "critical,digitalSignature");
    addExtension(cert.get(), iss, NID_ext_key_usage, "serverAuth");
    addExtension(cert.get(), iss, NID_subject_alt_name, san);
    addExtension(cert.get(), iss, NID_authority_key_identifier, "keyid:always");
  }
  check(X509_sign(cert.get(), issuerKey ? issuerKey : key, EVP_sha256()) > 0, "X509_sign");
  return cert;
}

std::string pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  check(PEM_write_bio_X509(bio.get(), cert) == 1, "PEM_write_bio_X509");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "PEM_write_bio_PrivateKey");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

TestPki makeTestPki(const std::vector<std::string>& dnsNames, const std::vector<std::string>& ips, long serial) {
  PkeyPtr caKey = newKey();
  X509Ptr ca = newCert(caKey.get(), "tessera test CA " + std::to_string(serial), serial, nullptr, nullptr, true, "");
  std::string san;
  for (const auto& d : dnsNames) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& i : ips) san += (san.empty() ? "" : ",") + std::string("IP:") + i;
  PkeyPtr serverKey = newKey();
  X509Ptr server = newCert(serverKey.get(), "tessera-webhook " + std::to_string(serial), serial + 1000, ca.get(),
                           caKey.get(), false, san);
  return TestPki{pem(ca.get()), pem(caKey.get()), pem(server.get()), pem(serverKey.get())};
}

void writeFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("rename " + tmp + " failed");
}

HttpsResult httpsRequest(uint16_t port, const std::string& caPem, const std::string& verifyName,
                         const std::string& method, const std::string& target, const std::string& body, int requests) {
  namespace net = boost::asio;
  namespace ssl = boost::asio::ssl;
  namespace beast = boost::beast;
  namespace bhttp = boost::beast::http;
  HttpsResult r;
  try {
    net::io_context ioc;
    ssl::context ctx(ssl::context::tls_client);
    ctx.set_verify_mode(ssl::verify_peer);
    ctx.add_certificate_authority(net::buffer(caPem));  // the only trust anchor
    beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
    SSL* ssl = stream.native_handle();
    SSL_set_tlsext_host_name(ssl, verifyName.c_str());
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    // An IP address is matched against the IP SANs, a name against the DNS SANs.
    if (X509_VERIFY_PARAM_set1_ip_asc(param, verifyName.c_str()) != 1)
      X509_VERIFY_PARAM_set1_host(param, verifyName.c_str(), 0);
    beast::get_lowest_layer(stream).connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    stream.handshake(ssl::stream_base::client);
    if (X509* peer = SSL_get1_peer_certificate(ssl)) {
      char line[256] = {0};
      X509_NAME_oneline(X509_get_subject_name(peer), line, sizeof line - 1);
      r.peerSubject = line;
      X509_free(peer);
    }
    beast::flat_buffer buffer;
    for (int i = 0; i < requests; ++i) {
      bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), target, 11);
      req.set(bhttp::field::host, verifyName);
      req.set(bhttp::field::content_type, "application/json");
      req.keep_alive(i + 1 < requests);
      req.body() = body;
      req.prepare_payload();
      bhttp::write(stream, req);
      bhttp::response<bhttp::string_body> res;
      bhttp::read(stream, buffer, res);
      r.status = res.result_int();
      r.body = res.body();
    }
    beast::error_code ec;
    stream.shutdown(ec);  // the server may close first; not an error here
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::string base64Decode(const std::string& text) {
  static const std::string kTable = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t buf = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const size_t v = kTable.find(c);
    if (v == std::string::npos) throw std::runtime_error("base64: unexpected character");
    buf = (buf << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buf >> bits) & 0xff);
    }
  }
  return out;
}

std::string podCreateReview(const nlohmann::json& pod, const std::string& ns, const std::string& uid) {
  return nlohmann::json{{"apiVersion", "admission.k8s.io/v1"},
                        {"kind", "AdmissionReview"},
                        {"request",
                         {{"uid", uid},
                          {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                          {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                          {"namespace", ns},
                          {"operation", "CREATE"},
                          {"object", pod}}}}
      .dump();
}

nlohmann::json admitPod(uint16_t port, const std::string& caPem, const nlohmann::json& pod, const std::string& ns) {
  HttpsResult r = httpsRequest(port, caPem, "127.0.0.1", "POST", "/mutate", podCreateReview(pod, ns, "admit"));
  if (!r.ok) throw std::runtime_error("webhook request failed: " + r.error);
  if (r.status != 200) throw std::runtime_error("webhook answered " + std::to_string(r.status) + ": " + r.body);
  const nlohmann::json res = nlohmann::json::parse(r.body).at("response");
  if (!res.at("allowed").get<bool>()) throw std::runtime_error("webhook refused the pod: " + r.body);
  if (!res.contains("patch")) return pod;
  return pod.patch(nlohmann::json::parse(base64Decode(res.at("patch").get<std::string>())));
}

}  // namespace tessera::testing
