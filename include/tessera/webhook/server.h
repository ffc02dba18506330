#pragma once
/// The HTTPS server of `tessera webhook` (Boost.Beast + OpenSSL, kept inside src/webhook): serves
/// admission.h's handleRequest on /mutate, /validate and /healthz. An in-process start/stop API so
/// tests (and the end-to-end integration test) can run it on 127.0.0.1 port 0.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tessera/api/result.h"
#include "tessera/webhook/admission.h"

namespace tessera::webhook {

struct ServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 9443;  ///< 0: any free port (start() returns the one bound)
  std::string certFile;  ///< PEM certificate chain (server certificate first)
  std::string keyFile;   ///< PEM private key
  Options admission;
  int threads = 2;
  /// Body limit of one request (AdmissionReviews carry the object twice on UPDATE).
  uint64_t maxBodyBytes = 8u << 20;
  /// Called for each admission decision and for certificate reloads (may be empty). Called on I/O
  /// threads, one line at a time.
  std::function<void(const std::string&)> log;
  /// Suffixes for generated ConfigMap names; empty = randomSuffixes().
  SuffixSource suffix;
};

/// Serves HTTPS until stop(). Certificate rotation: before each new connection the server compares
/// the cert and key files' identity (device, inode, size, mtime: a stat each) with what it loaded;
/// when they changed it loads them again and new connections use the new pair. A pair that does
/// not load (a rotation half written, a key that does not match) keeps the old one and is retried
/// on the next connection. Thread-safe.
class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Loads the certificate and key, binds, listens and starts the I/O threads. Returns the port.
  /// Errors name the file or the address.
  api::Result<uint16_t> start();
  /// Stops accepting, closes connections, joins the threads. Idempotent.
  void stop();
  uint16_t port() const;
  /// Successful certificate reloads since start (not counting the first load).
  uint64_t certificateReloads() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// `tessera webhook --tls-cert-file F --tls-key-file F [--port 9443] [--address 0.0.0.0]
/// [--isolation hard|mps|none] [--interposer-path DIR] [--interposer-source init-container|host-path]
/// [--interposer-image IMAGE] [--scheduler-name tessera] [--mps-pipe-directory DIR]`: serves until SIGTERM/SIGINT.
/// Returns the exit code.
int webhookCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera::webhook
