// The webhook's HTTPS server: one TlsConnection per accepted socket (handshake, keep-alive request loop,
// shutdown), every operation with a timeout; the TLS context is swapped when the certificate files
// change. Asio/Beast are compiled once in tessera_http (asio_impl.cpp); this TU only declares.
#include "tessera/webhook/server.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

namespace tessera::webhook {

namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
constexpr auto kRequestTimeout = std::chrono::seconds(30);  // idle keep-alive included
constexpr auto kShutdownTimeout = std::chrono::seconds(5);

/// What identifies a file's content cheaply: a Secret volume rotates through a symlink swap
/// (new inode), an in-place write changes size or mtime.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  int64_t mtimeNs = 0;
  bool operator==(const FileId&) const = default;
};

std::optional<FileId> fileId(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino, st.st_size, int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

api::Result<std::string> readFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return api::makeError(flag + " " + path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) return api::makeError(flag + " " + path + ": the file is empty");
  return ss.str();
}

api::Result<std::shared_ptr<ssl::context>> loadContextImpl(const std::string& certFile, const std::string& keyFile) {
  TESSERA_ASSIGN_OR_RETURN(const std::string cert, readFile("--tls-cert-file", certFile));
  TESSERA_ASSIGN_OR_RETURN(const std::string key, readFile("--tls-key-file", keyFile));
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  beast::error_code ec;
  ctx->use_certificate_chain(net::buffer(cert), ec);
  if (ec) return api::makeError("--tls-cert-file " + certFile + ": not a PEM certificate chain (" + ec.message() + ")");
  {
    // Parsed on its own first, so that "not a key" and "not this certificate's key" read apart.
    BIO* bio = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
    EVP_PKEY* pkey = bio ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
    if (bio) BIO_free(bio);
    if (!pkey) return api::makeError("--tls-key-file " + keyFile + ": not a PEM private key");
    const bool matches =
        SSL_CTX_use_PrivateKey(ctx->native_handle(), pkey) == 1 && SSL_CTX_check_private_key(ctx->native_handle()) == 1;
    EVP_PKEY_free(pkey);
    if (!matches)
      return api::makeError("--tls-key-file " + keyFile + ": the key does not match the certificate in " + certFile);
  }
  return ctx;
}

api::Result<std::shared_ptr<ssl::context>> loadContext(const std::string& certFile, const std::string& keyFile) {
  auto r = loadContextImpl(certFile, keyFile);
  if (!r.ok()) ERR_clear_error();  // leave no stale errors on this thread's OpenSSL error queue
  return r;
}

/// Owns the io_context; connections live in its handlers and point back here (raw): they only run
/// while the threads run, which stop() joins before the Impl can go.
struct Core {
  ServerOptions options;
  SuffixSource suffix;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  std::vector<std::thread> pool;
  uint16_t port = 0;
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> reloads{0};

  std::mutex ctxMu;
  std::shared_ptr<ssl::context> ctx;
  std::optional<FileId> certId, keyId;
  std::string lastReloadError;

  std::mutex logMu;

  void log(const std::string& line) {
    if (!options.log) return;
    std::lock_guard lock(logMu);
    options.log(line);
  }

  /// The context for a new connection, reloaded first when the files changed.
  std::shared_ptr<ssl::context> context() {
    std::lock_guard lock(ctxMu);
    auto c = fileId(options.certFile);
    auto k = fileId(options.keyFile);
    if (c && k && (c != certId || k != keyId)) {
      auto fresh = loadContext(options.certFile, options.keyFile);
      if (fresh.ok()) {
        ctx = std::move(fresh).value();
        certId = c;
        keyId = k;
        reloads.fetch_add(1);
        log("reloaded the TLS certificate from " + options.certFile);
      } else {
        // Half-written rotation or a bad pair: keep serving with the old one; retried next time
        // (the ids are not updated), logged once per change.
        if (fresh.error().message != lastReloadError) log("keeping the old TLS certificate: " + fresh.error().message);
        lastReloadError = fresh.error().message;
      }
    }
    return ctx;
  }

  void accept();
};

class TlsConnection : public std::enable_shared_from_this<TlsConnection> {
 public:
  TlsConnection(tcp::socket socket, std::shared_ptr<ssl::context> ctx, Core* server)
      : ctx_(std::move(ctx)), stream_(std::move(socket), *ctx_), server_(server) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      beast::get_lowest_layer(self->stream_).expires_after(kHandshakeTimeout);
      self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
        if (ec) return;  // a client that gave up, a port scan, an untrusting client: nothing to answer
        self->read();
      });
    });
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(server_->options.maxBodyBytes);
    beast::get_lowest_layer(stream_).expires_after(kRequestTimeout);
    bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec == bhttp::error::end_of_stream) return self->shutdown();
      if (ec == bhttp::error::body_limit)
        return self->write(413, "text/plain; charset=utf-8", "request body too large\n", false);
      if (ec) return;  // timeout or reset: the socket closes with the connection
      self->handle();
    });
  }

  void handle() {
    bhttp::request<bhttp::string_body> req = parser_->release();
    const std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    HttpAnswer a =
        handleRequest(std::string(req.method_string()), path, req.body(), server_->options.admission, server_->suffix);
    if (!a.summary.empty()) server_->log(a.summary);
    write(a.status, a.contentType, std::move(a.body), req.keep_alive());
  }

  void write(int status, const std::string& contentType, std::string body, bool keepAlive) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(status), 11);
    res->set(bhttp::field::server, "tessera-webhook");
    res->set(bhttp::field::content_type, contentType);
    res->keep_alive(keepAlive);
    res->body() = std::move(body);
    res->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(kRequestTimeout);
    bhttp::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec) return;
      if (!res->keep_alive()) return self->shutdown();
      self->read();
    });
  }

  void shutdown() {
    beast::get_lowest_layer(stream_).expires_after(kShutdownTimeout);
    stream_.async_shutdown([self = shared_from_this()](beast::error_code) {
      beast::error_code ignored;
      beast::get_lowest_layer(self->stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    });
  }

  std::shared_ptr<ssl::context> ctx_;  // before stream_: the stream's SSL object comes from it
  beast::ssl_stream<beast::tcp_stream> stream_;
  Core* server_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
};

}  // namespace

struct Server::Impl : Core {};

void Core::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || stopped) return;
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<TlsConnection>(std::move(socket), context(), this)->start();
    }
    if (!stopped) accept();
  });
}

Server::Server(ServerOptions options) : impl_(std::make_shared<Impl>()) {
  impl_->options = std::move(options);
  impl_->suffix = impl_->options.suffix ? impl_->options.suffix : randomSuffixes();
}

Server::~Server() { stop(); }

api::Result<uint16_t> Server::start() {
  Impl& s = *impl_;
  if (s.options.certFile.empty()) return api::makeError("--tls-cert-file: required");
  if (s.options.keyFile.empty()) return api::makeError("--tls-key-file: required");
  {
    std::lock_guard lock(s.ctxMu);
    s.certId = fileId(s.options.certFile);
    s.keyId = fileId(s.options.keyFile);
    TESSERA_ASSIGN_OR_RETURN(s.ctx, loadContext(s.options.certFile, s.options.keyFile));
  }
  beast::error_code ec;
  auto addr = net::ip::make_address(s.options.address, ec);
  if (ec) return api::makeError("--address \"" + s.options.address + "\": " + ec.message());
  tcp::endpoint ep(addr, s.options.port);
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return api::makeError("listening on " + s.options.address + ":" + std::to_string(s.options.port) + ": " +
                          ec.message());
  s.port = s.acceptor.local_endpoint().port();
  s.work.emplace(s.ioc.get_executor());
  s.accept();
  for (int i = 0; i < std::max(1, s.options.threads); ++i) s.pool.emplace_back([impl = &s] { impl->ioc.run(); });
  return s.port;
}

void Server::stop() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.pool) t.join();
  s.pool.clear();
  // No thread runs now: close the listening socket at once (connections still open are closed when
  // the io_context goes, with the Server).
  beast::error_code ignored;
  s.acceptor.close(ignored);
}

uint16_t Server::port() const { return impl_->port; }

uint64_t Server::certificateReloads() const { return impl_->reloads.load(); }

}  // namespace tessera::webhook
