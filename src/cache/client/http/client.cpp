// The ClusterClient over HTTP(S) on Boost.Beast. Requests run as async operations on a small pool
// of I/O threads (so every step has a timeout); the calling thread blocks on the result. Watches are
// long-lived async reads that feed the incremental decoder and reconnect by themselves.
#include <atomic>
#include <limits>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "rest_paths.h"
#include "tessera/api/log.h"
#include "tessera/cache/http_client.h"
#include "tessera/cache/rate_limit.h"
#include "tessera/cache/watch_decoder.h"

namespace tessera::cache {

namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using Strand = net::strand<net::io_context::executor_type>;
/// Not boost::none: Boost 1.74's parser compares `len > body_limit_` as optionals, and any length
/// is greater than none, so a Content-Length answer would fail with body_limit.
constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();
using http::collectionPath;
using http::objectPath;
using http::statusJson;

int64_t nowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct ServerUrl {
  bool tls = false;
  std::string host, port, basePath;
};

api::Result<ServerUrl> parseServer(const std::string& server) {
  ServerUrl u;
  std::string rest;
  if (server.rfind("https://", 0) == 0) {
    u.tls = true;
    rest = server.substr(8);
  } else if (server.rfind("http://", 0) == 0) {
    rest = server.substr(7);
  } else {
    return api::makeError("server \"" + server + "\": must start with https:// or http://");
  }
  auto slash = rest.find('/');
  std::string hostPort = rest.substr(0, slash);
  if (slash != std::string::npos) u.basePath = rest.substr(slash);
  while (!u.basePath.empty() && u.basePath.back() == '/') u.basePath.pop_back();
  if (!hostPort.empty() && hostPort.front() == '[') {  // [::1]:6443
    auto close = hostPort.find(']');
    if (close == std::string::npos) return api::makeError("server \"" + server + "\": bad IPv6 address");
    u.host = hostPort.substr(1, close - 1);
    if (close + 1 < hostPort.size() && hostPort[close + 1] == ':') u.port = hostPort.substr(close + 2);
  } else {
    auto colon = hostPort.rfind(':');
    u.host = hostPort.substr(0, colon);
    if (colon != std::string::npos) u.port = hostPort.substr(colon + 1);
  }
  if (u.host.empty()) return api::makeError("server \"" + server + "\": no host");
  if (u.port.empty()) u.port = u.tls ? "443" : "80";
  return u;
}

/// One connection: plain TCP or TLS over TCP, on its own strand.
struct Conn {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  beast::tcp_stream& tcp() { return tls ? tls->next_layer() : *plain; }
  template <class F>
  void with(F&& f) {
    if (tls) f(*tls);
    else f(*plain);
  }
  void close() {
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp().socket().close(ec);
  }
};

struct Answer {
  int code = 0;  ///< 0: transport failure
  std::string body;
  std::string transportError;
  int64_t retryAfterSeconds = -1;
  bool sent = false;  ///< the request reached the wire (a POST that failed after this is not retried)
};

}  // namespace

/// Shared I/O state: the io_context and its threads, TLS context, pool, auth. Owned by the client;
/// watch handles keep a weak reference so that stop() after the client is gone is harmless.
struct HttpCore : std::enable_shared_from_this<HttpCore> {
  RestConfig config;
  HttpClientOptions options;
  ServerUrl url;
  net::io_context ioc;
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  std::unique_ptr<ssl::context> sslCtx;
  std::vector<std::thread> threads;
  TokenBucket bucket;

  std::mutex poolMu;
  std::vector<std::unique_ptr<Conn>> idle;

  std::mutex tokenMu;
  std::string token;
  Clock::time_point tokenReadAt{};

  std::mutex rngMu;
  uint64_t seedCounter = 0;

  HttpCore(RestConfig c, HttpClientOptions o, ServerUrl u)
      : config(std::move(c)), options(std::move(o)), url(std::move(u)), bucket(options.qps, options.burst) {}

  ~HttpCore() {
    work.reset();
    ioc.stop();
    for (auto& t : threads) t.join();
    threads.clear();
  }

  api::Status init() {
    if (url.tls) {
      sslCtx = std::make_unique<ssl::context>(ssl::context::tls_client);
      beast::error_code ec;
      if (config.insecureSkipTlsVerify) {
        sslCtx->set_verify_mode(ssl::verify_none);
      } else {
        sslCtx->set_verify_mode(ssl::verify_peer);
        if (!config.caData.empty()) sslCtx->add_certificate_authority(net::buffer(config.caData), ec);
        else sslCtx->set_default_verify_paths(ec);
        if (ec) return api::makeError("loading the certificate authority: " + ec.message());
      }
      if (!config.clientCertData.empty()) {
        sslCtx->use_certificate_chain(net::buffer(config.clientCertData), ec);
        if (ec) return api::makeError("loading the client certificate: " + ec.message());
        sslCtx->use_private_key(net::buffer(config.clientKeyData), ssl::context::pem, ec);
        if (ec) return api::makeError("loading the client key: " + ec.message());
      }
    }
    token = config.token;
    if (!config.tokenFile.empty()) TESSERA_TRY(readToken());
    const int n = std::max(1, options.ioThreads);
    for (int i = 0; i < n; ++i) threads.emplace_back([this] { ioc.run(); });
    return api::Status::success();
  }

  api::Status readToken() {
    std::ifstream in(config.tokenFile);
    if (!in) return api::makeError("reading token file " + config.tokenFile + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string t = ss.str();
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    token = t;
    tokenReadAt = Clock::now();
    return api::Status::success();
  }

  std::string authorization() {
    std::lock_guard lock(tokenMu);
    if (!config.tokenFile.empty() &&
        Clock::now() - tokenReadAt > std::chrono::milliseconds(options.tokenRefreshMs)) {
      (void)readToken();  // keep the old token if the file is briefly unreadable during rotation
    }
    return token.empty() ? std::string() : "Bearer " + token;
  }

  uint64_t nextSeed() {
    std::lock_guard lock(rngMu);
    return options.seed * 0x9E3779B97F4A7C15ull + ++seedCounter;
  }

  /// A new connection whose handlers run on `strand` (a fresh one when not given).
  std::unique_ptr<Conn> newConn(std::optional<Strand> strand = std::nullopt) {
    Strand s = strand ? *strand : net::make_strand(ioc);
    auto c = std::make_unique<Conn>();
    if (url.tls) {
      c->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(s, *sslCtx);
    } else {
      c->plain = std::make_unique<beast::tcp_stream>(s);
    }
    return c;
  }

  std::unique_ptr<Conn> takeIdle() {
    std::lock_guard lock(poolMu);
    if (idle.empty()) return nullptr;
    auto c = std::move(idle.back());
    idle.pop_back();
    return c;
  }

  void putIdle(std::unique_ptr<Conn> c) {
    std::lock_guard lock(poolMu);
    if (idle.size() < 64) idle.push_back(std::move(c));
  }

  bhttp::request<bhttp::string_body> makeRequest(bhttp::verb verb, const std::string& target, std::string body,
                                                 const std::string& contentType) {
    bhttp::request<bhttp::string_body> req{verb, url.basePath + target, 11};
    req.set(bhttp::field::host, url.host + ":" + url.port);
    req.set(bhttp::field::user_agent, options.userAgent);
    req.set(bhttp::field::accept, "application/json");
    if (auto a = authorization(); !a.empty()) req.set(bhttp::field::authorization, a);
    if (!contentType.empty()) req.set(bhttp::field::content_type, contentType);
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  /// Connects `conn` (resolve, TCP, TLS), then calls `done(ec)` on the connection's strand.
  template <class Done>
  void connect(Conn& conn, std::shared_ptr<void> keep, Done done) {
    auto resolver = std::make_shared<tcp::resolver>(conn.tcp().get_executor());
    resolver->async_resolve(
        url.host, url.port,
        [this, &conn, resolver, keep, done](beast::error_code ec, tcp::resolver::results_type results) mutable {
          if (ec) return done(ec);
          conn.tcp().expires_after(std::chrono::milliseconds(options.connectTimeoutMs));
          conn.tcp().async_connect(results, [this, &conn, keep, done](beast::error_code ec,
                                                                      const tcp::endpoint&) mutable {
            if (ec || !conn.tls) return done(ec);
            const std::string& name = config.tlsServerName.empty() ? url.host : config.tlsServerName;
            SSL_set_tlsext_host_name(conn.tls->native_handle(), name.c_str());
            if (!config.insecureSkipTlsVerify) conn.tls->set_verify_callback(ssl::host_name_verification(name));
            conn.tcp().expires_after(std::chrono::milliseconds(options.connectTimeoutMs));
            conn.tls->async_handshake(ssl::stream_base::client,
                                      [keep, done](beast::error_code ec) mutable { done(ec); });
          });
        });
  }
};

namespace {

/// One request/response exchange on a pooled (or new) connection.
struct Exchange : std::enable_shared_from_this<Exchange> {
  HttpCore& core;
  bhttp::request<bhttp::string_body> req;
  std::unique_ptr<Conn> conn;
  bool reused = false;
  bool retriedFresh = false;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser;
  std::promise<Answer> promise;
  Answer answer;

  Exchange(HttpCore& c, bhttp::request<bhttp::string_body> r) : core(c), req(std::move(r)) {}

  void start() {
    conn = core.takeIdle();
    reused = conn != nullptr;
    if (!conn) {
      conn = core.newConn();
      auto self = shared_from_this();
      core.connect(*conn, self, [self](beast::error_code ec) {
        if (ec) return self->finish(ec, "connecting");
        self->write();
      });
      return;
    }
    auto self = shared_from_this();
    net::post(conn->tcp().get_executor(), [self] { self->write(); });
  }

  void write() {
    answer.sent = true;
    conn->tcp().expires_after(std::chrono::milliseconds(core.options.requestTimeoutMs));
    auto self = shared_from_this();
    conn->with([&](auto& stream) {
      bhttp::async_write(stream, req, [self](beast::error_code ec, size_t) {
        if (ec) return self->failed(ec, "sending");
        self->read();
      });
    });
  }

  void read() {
    parser.emplace();
    parser->body_limit(kNoLimit);
    auto self = shared_from_this();
    conn->with([&](auto& stream) {
      bhttp::async_read(stream, conn->buffer, *parser, [self](beast::error_code ec, size_t) {
        if (ec) return self->failed(ec, "reading the answer");
        self->done();
      });
    });
  }

  /// A kept-alive connection the server has closed meanwhile fails at once: try a fresh one once.
  void failed(beast::error_code ec, const char* what) {
    if (reused && !retriedFresh &&
        (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe)) {
      retriedFresh = true;
      reused = false;
      conn->close();
      conn = core.newConn();
      auto self = shared_from_this();
      core.connect(*conn, self, [self](beast::error_code ec) {
        if (ec) return self->finish(ec, "connecting");
        self->write();
      });
      return;
    }
    finish(ec, what);
  }

  void done() {
    auto& msg = parser->get();
    answer.code = static_cast<int>(msg.result_int());
    answer.body = std::move(msg.body());
    auto ra = msg.find(bhttp::field::retry_after);
    if (ra != msg.end()) {
      try {
        answer.retryAfterSeconds = std::stoll(std::string(ra->value()));
      } catch (...) {
      }
    }
    const bool keep = msg.keep_alive();
    conn->tcp().expires_never();
    if (keep) core.putIdle(std::move(conn));
    else conn->close();
    promise.set_value(std::move(answer));
  }

  void finish(beast::error_code ec, const char* what) {
    if (conn) conn->close();
    answer.code = 0;
    answer.transportError = std::string(what) + ": " + ec.message();
    promise.set_value(std::move(answer));
  }
};

const char* verbName(bhttp::verb v) {
  switch (v) {
    case bhttp::verb::get: return "GET";
    case bhttp::verb::post: return "POST";
    case bhttp::verb::put: return "PUT";
    case bhttp::verb::patch: return "PATCH";
    case bhttp::verb::delete_: return "DELETE";
    default: return "OTHER";
  }
}

/// A watch stream: connects, streams, reconnects from the last RV; ends on Gone / ERROR.
struct WatchStream : std::enable_shared_from_this<WatchStream> {
  HttpCore& core;
  api::Kind kind;
  std::string rv;
  WatchCallback callback;
  Strand strand;  ///< every handler of this watch, across reconnects, runs here
  std::unique_ptr<Conn> conn;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser;
  bhttp::request<bhttp::string_body> req;
  WatchDecoder decoder;
  Backoff backoff;
  std::unique_ptr<net::steady_timer> timer;
  bool gotEvents = false;
  Clock::time_point startedAt;

  std::recursive_mutex cbMu;  ///< held while delivering; stop() takes it so no callback runs after
  std::atomic<bool> stopped{false};

  std::string ns;        ///< empty: every namespace
  std::string selectors;  ///< "&labelSelector=...&fieldSelector=..." (encoded), or empty

  WatchStream(HttpCore& c, api::Kind k, std::string from, WatchCallback cb)
      : core(c), kind(k), rv(std::move(from)), callback(std::move(cb)), strand(net::make_strand(c.ioc)),
        backoff(c.options.watchReconnectInitialMs, c.options.watchReconnectMaxMs, c.nextSeed()) {}

  /// Delivers unless stopped; returns false when the stream must end.
  bool deliver(const WatchEvent& ev) {
    std::lock_guard lock(cbMu);
    if (stopped) return false;
    callback(ev);
    return true;
  }

  void observe(int code) {
    if (!core.options.observer) return;
    core.options.observer("WATCH", code, std::chrono::duration<double>(Clock::now() - startedAt).count());
  }

  void begin() {
    if (stopped) return;
    conn = core.newConn(strand);
    if (!timer) timer = std::make_unique<net::steady_timer>(strand);
    std::string target = collectionPath(kind, ns) + "?watch=true&allowWatchBookmarks=true&timeoutSeconds=" +
                         std::to_string(core.options.watchTimeoutSeconds) + selectors;
    if (!rv.empty()) target += "&resourceVersion=" + http::urlEncode(rv);
    req = core.makeRequest(bhttp::verb::get, target, "", "");
    decoder = WatchDecoder();
    gotEvents = false;
    startedAt = Clock::now();
    const int64_t wait = core.bucket.reserve(nowNanos());
    auto self = shared_from_this();
    if (wait > 0) {
      timer->expires_after(std::chrono::nanoseconds(wait));
      timer->async_wait([self](beast::error_code) { self->connectNow(); });
    } else {
      net::post(strand, [self] { self->connectNow(); });
    }
  }

  void connectNow() {
    if (stopped) return;
    auto self = shared_from_this();
    core.connect(*conn, self, [self](beast::error_code ec) {
      if (ec) return self->retryLater();
      self->send();
    });
  }

  void send() {
    if (stopped) return;
    conn->tcp().expires_after(std::chrono::milliseconds(core.options.requestTimeoutMs));
    auto self = shared_from_this();
    conn->with([&](auto& stream) {
      bhttp::async_write(stream, req, [self](beast::error_code ec, size_t) {
        if (ec) return self->retryLater();
        self->readHeader();
      });
    });
  }

  int64_t idleMs() const {
    return core.options.watchIdleTimeoutMs > 0 ? core.options.watchIdleTimeoutMs
                                                : core.options.watchTimeoutSeconds * 1000 + 30'000;
  }

  void readHeader() {
    parser.emplace();
    parser->body_limit(kNoLimit);
    conn->tcp().expires_after(std::chrono::milliseconds(core.options.requestTimeoutMs));
    auto self = shared_from_this();
    conn->with([&](auto& stream) {
      bhttp::async_read_header(stream, conn->buffer, *parser, [self](beast::error_code ec, size_t) {
        if (ec) return self->retryLater();
        self->onHeader();
      });
    });
  }

  void onHeader() {
    if (stopped) return;
    const int code = static_cast<int>(parser->get().result_int());
    if (code == 200) {
      observe(200);
      readBody();
      return;
    }
    // Read the (short) error body, then decide.
    conn->tcp().expires_after(std::chrono::milliseconds(core.options.requestTimeoutMs));
    auto self = shared_from_this();
    conn->with([&](auto& stream) {
      bhttp::async_read(stream, conn->buffer, *parser, [self, code](beast::error_code, size_t) {
        self->observe(code);
        self->conn->close();
        const std::string message = http::messageOf(self->parser->get().body());
        // 410: the version was compacted. 504 "Too large resource version": the server never had
        // it (it lost its state); waiting would never end. Either way the owner relists.
        if (code == 410 || (code == 504 && message.find("Too large resource version") != std::string::npos)) {
          self->gone(statusJson(code, message));
        } else {
          self->retryLater();
        }
      });
    });
  }

  void readBody() {
    if (stopped) return;
    conn->tcp().expires_after(std::chrono::milliseconds(idleMs()));
    auto self = shared_from_this();
    conn->with([&](auto& stream) {
      bhttp::async_read_some(stream, conn->buffer, *parser, [self](beast::error_code ec, size_t) {
        self->onBody(ec);
      });
    });
  }

  void onBody(beast::error_code ec) {
    if (stopped) return;
    std::string& body = parser->get().body();
    if (!body.empty()) {
      auto events = decoder.feed(body);
      body.clear();
      if (!events.ok()) {
        log::warning("watch ", api::kindInfo(kind).plural, ": ", events.error().message, "; reconnecting");
        conn->close();
        return retryLater();
      }
      for (auto& ev : *events) {
        if (ev.type == WatchEventType::Error) {
          conn->close();
          Json status = ev.object;
          if (!status.contains("code")) status["code"] = 500;
          return gone(std::move(status));
        }
        if (ev.object.contains("metadata") && ev.object["metadata"].is_object()) {
          const std::string r = ev.object["metadata"].value("resourceVersion", "");
          if (!r.empty()) rv = r;
        }
        gotEvents = true;
        if (!deliver(ev)) return;
      }
    }
    if (ec || parser->is_done()) {
      // A normal end (server timeout) or a dropped stream: reconnect from the last RV.
      if (ec) log::warning("watch ", api::kindInfo(kind).plural, ": stream broken (", ec.message(), "); reconnecting");
      else if (log::v(2)) log::info("watch ", api::kindInfo(kind).plural, ": ended by the server; reconnecting");
      conn->close();
      if (gotEvents) backoff.reset();
      if (!ec && gotEvents) return begin();
      return retryLater();
    }
    readBody();
  }

  void gone(Json status) {
    WatchEvent ev{WatchEventType::Error, std::move(status)};
    deliver(ev);
    stopped = true;  // the caller relists and starts a new watch
  }

  void retryLater() {
    if (stopped) return;
    if (conn) conn->close();
    const int64_t ms = backoff.next();
    timer->expires_after(std::chrono::milliseconds(ms));
    auto self = shared_from_this();
    timer->async_wait([self](beast::error_code ec) {
      if (ec || self->stopped) return;
      self->begin();
    });
  }

  void shutdown() {
    {
      std::lock_guard lock(cbMu);
      stopped = true;
    }
    auto self = shared_from_this();
    net::post(strand, [self] {
      if (self->conn) self->conn->close();
      if (self->timer) self->timer->cancel();
    });
  }
};

class HttpWatchHandle final : public WatchHandle {
 public:
  HttpWatchHandle(std::weak_ptr<HttpCore> core, std::shared_ptr<WatchStream> stream)
      : core_(std::move(core)), stream_(std::move(stream)) {}
  ~HttpWatchHandle() override { stop(); }
  void stop() override {
    if (!stream_) return;
    if (auto core = core_.lock()) {
      stream_->shutdown();
    } else {
      std::lock_guard lock(stream_->cbMu);
      stream_->stopped = true;
    }
    stream_.reset();
  }

 private:
  std::weak_ptr<HttpCore> core_;
  std::shared_ptr<WatchStream> stream_;
};

class HttpClusterClient final : public ClusterClient {
 public:
  explicit HttpClusterClient(std::shared_ptr<HttpCore> core) : core_(std::move(core)) {}

  api::Result<ListResult> list(api::Kind kind, const ListOptions& o) override {
    std::string target = collectionPath(kind, o.namespace_);
    std::string q;
    auto add = [&](const char* k, const std::string& v) {
      if (v.empty()) return;
      q += (q.empty() ? "?" : "&") + std::string(k) + "=" + http::urlEncode(v);
    };
    add("labelSelector", o.labelSelector);
    add("fieldSelector", o.fieldSelector);
    if (o.limit > 0) add("limit", std::to_string(o.limit));
    add("continue", o.continueToken);
    TESSERA_ASSIGN_OR_RETURN(Json j, perform(bhttp::verb::get, target + q, "", "", "LIST"));
    ListResult r;
    if (!j.is_object()) return api::makeError("listing " + target + ": the answer is not an object");
    if (j.contains("metadata") && j["metadata"].is_object()) {
      r.resourceVersion = j["metadata"].value("resourceVersion", "");
      r.continueToken = j["metadata"].value("continue", "");
    }
    const api::KindInfo& ki = api::kindInfo(kind);
    if (j.contains("items") && j["items"].is_array()) {
      r.items.reserve(j["items"].size());
      for (auto& item : j["items"]) {
        // Items of a list carry no kind/apiVersion on real servers; the converters like them present.
        if (!item.contains("kind")) item["kind"] = std::string(ki.name);
        if (!item.contains("apiVersion")) item["apiVersion"] = ki.apiVersion();
        r.items.push_back(std::move(item));
      }
    }
    return r;
  }

  api::Result<std::unique_ptr<WatchHandle>> watch(api::Kind kind, const std::string& resourceVersion,
                                                  WatchCallback callback) override {
    auto stream = std::make_shared<WatchStream>(*core_, kind, resourceVersion, std::move(callback));
    stream->begin();
    return std::unique_ptr<WatchHandle>(std::make_unique<HttpWatchHandle>(core_, std::move(stream)));
  }

  api::Result<std::unique_ptr<WatchHandle>> watchSelected(api::Kind kind, const std::string& resourceVersion,
                                                          const ListOptions& o, WatchCallback callback) override {
    auto stream = std::make_shared<WatchStream>(*core_, kind, resourceVersion, std::move(callback));
    stream->ns = o.namespace_;
    if (!o.labelSelector.empty()) stream->selectors += "&labelSelector=" + http::urlEncode(o.labelSelector);
    if (!o.fieldSelector.empty()) stream->selectors += "&fieldSelector=" + http::urlEncode(o.fieldSelector);
    stream->begin();
    return std::unique_ptr<WatchHandle>(std::make_unique<HttpWatchHandle>(core_, std::move(stream)));
  }

  api::Result<Json> get(api::Kind kind, const std::string& ns, const std::string& name) override {
    return perform(bhttp::verb::get, objectPath(kind, ns, name), "", "", "GET");
  }

  api::Result<Json> create(api::Kind kind, const Json& object) override {
    std::string ns;
    if (object.contains("metadata") && object["metadata"].is_object()) ns = object["metadata"].value("namespace", "");
    if (api::kindInfo(kind).namespaced && ns.empty()) ns = "default";
    return perform(bhttp::verb::post, collectionPath(kind, ns), object.dump(), "application/json", "POST");
  }

  api::Result<Json> update(api::Kind kind, const Json& object) override { return put(kind, object, ""); }
  api::Result<Json> updateStatus(api::Kind kind, const Json& object) override { return put(kind, object, "status"); }

  api::Result<Json> patch(api::Kind kind, const std::string& ns, const std::string& name, PatchType type,
                          const Json& patch, bool statusSubresource) override {
    const char* ct = type == PatchType::Merge            ? "application/merge-patch+json"
                     : type == PatchType::StrategicMerge ? "application/strategic-merge-patch+json"
                                                         : "application/json-patch+json";
    return perform(bhttp::verb::patch, objectPath(kind, ns, name, statusSubresource ? "status" : ""), patch.dump(),
                   ct, "PATCH");
  }

  api::Status remove(api::Kind kind, const std::string& ns, const std::string& name,
                     const DeleteOptions& options) override {
    Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
    if (options.gracePeriodSeconds) body["gracePeriodSeconds"] = *options.gracePeriodSeconds;
    if (!options.preconditionUid.empty()) body["preconditions"] = {{"uid", options.preconditionUid}};
    TESSERA_TRY(perform(bhttp::verb::delete_, objectPath(kind, ns, name), body.dump(), "application/json", "DELETE",
                        /*readAnswer=*/false));
    return api::Status::success();
  }

  api::Status bind(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& node) override {
    Json b = {{"apiVersion", "v1"},
              {"kind", "Binding"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
    if (!uid.empty()) b["metadata"]["uid"] = uid;
    TESSERA_TRY(perform(bhttp::verb::post, objectPath(api::Kind::Pod, ns, name, "binding"), b.dump(),
                        "application/json", "POST", /*readAnswer=*/false));
    return api::Status::success();
  }

 private:
  api::Result<Json> put(api::Kind kind, const Json& object, const char* sub) {
    std::string ns, name;
    if (object.contains("metadata") && object["metadata"].is_object()) {
      ns = object["metadata"].value("namespace", "");
      name = object["metadata"].value("name", "");
    }
    if (api::kindInfo(kind).namespaced && ns.empty()) ns = "default";
    return perform(bhttp::verb::put, objectPath(kind, ns, name, sub), object.dump(), "application/json", "PUT");
  }

  Answer once(bhttp::verb verb, const std::string& target, const std::string& body, const std::string& contentType) {
    const int64_t wait = core_->bucket.reserve(nowNanos());
    if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
    auto ex = std::make_shared<Exchange>(*core_, core_->makeRequest(verb, target, body, contentType));
    auto fut = ex->promise.get_future();
    ex->start();
    ex.reset();
    return fut.get();
  }

  /// The request, retried as its verb allows; the answer's object on success (an empty object
  /// unless `readAnswer`: a bind's or delete's Status is not parsed, as no caller reads it).
  api::Result<Json> perform(bhttp::verb verb, const std::string& target, const std::string& body,
                            const std::string& contentType, const char* metricVerb, bool readAnswer = true) {
    const bool idempotent = verb != bhttp::verb::post;
    Backoff backoff(core_->options.retryInitialMs, core_->options.retryMaxMs, core_->nextSeed());
    for (int attempt = 0;; ++attempt) {
      const auto t0 = Clock::now();
      Answer a = once(verb, target, body, contentType);
      if (core_->options.observer)
        core_->options.observer(metricVerb, a.code, std::chrono::duration<double>(Clock::now() - t0).count());
      if (a.code >= 200 && a.code < 300) {
        if (a.body.empty() || !readAnswer) return Json::object();
        try {
          return Json::parse(a.body);
        } catch (const std::exception& e) {
          return api::makeError(std::string(verbName(verb)) + " " + target + ": malformed JSON answer: " + e.what());
        }
      }
      const bool retryable = a.code == 429 || ((a.code >= 500 || a.code == 0) && (idempotent || !a.sent));
      const bool serverTrouble = a.code == 429 || a.code >= 500 || a.code == 0;
      // Server trouble is logged on every attempt; other refusals (404, 409, 422) are answers the
      // caller handles, shown only at -v=4.
      if (serverTrouble || log::v(4))
        log::warning("API ", verbName(verb), " ", target, ": ",
                     a.code == 0 ? a.transportError : std::to_string(a.code) + " " + http::messageOf(a.body),
                     retryable && attempt < core_->options.maxRetries ? " (retrying)" : "");
      if (!retryable || attempt >= core_->options.maxRetries) {
        if (a.code == 0)
          return api::makeError(std::string(verbName(verb)) + " " + core_->config.server + target + ": " +
                                    a.transportError,
                                0);
        return api::makeError(http::messageOf(a.body), a.code);
      }
      int64_t ms = backoff.next();
      if (a.retryAfterSeconds >= 0) ms = std::min<int64_t>(a.retryAfterSeconds * 1000, core_->options.retryMaxMs);
      if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
  }

  std::shared_ptr<HttpCore> core_;
};

}  // namespace

api::Result<std::unique_ptr<ClusterClient>> makeHttpClient(const RestConfig& config, HttpClientOptions options) {
  TESSERA_ASSIGN_OR_RETURN(auto url, parseServer(config.server));
  auto core = std::make_shared<HttpCore>(config, std::move(options), std::move(url));
  TESSERA_TRY(core->init());
  return std::unique_ptr<ClusterClient>(std::make_unique<HttpClusterClient>(std::move(core)));
}

}  // namespace tessera::cache
