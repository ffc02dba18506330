// The HTTP client against the test API server over real sockets on 127.0.0.1.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tessera/cache/http_client.h"
#include "tessera/cache/http_server.h"
#include "tessera/cache/memory_cluster.h"

using namespace tessera;
using namespace tessera::cache;

namespace {

Json node(const std::string& name) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}}},
              {"status", {{"allocatable", {{"cpu", "8"}, {"memory", "32Gi"}, {"pods", "110"}}},
                          {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json pod(const std::string& name) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "default"}}},
              {"spec", {{"schedulerName", "tessera"},
                        {"containers", {{{"name", "c"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}}}}};
}

/// Collects watch events; waits for a condition with a generous safety deadline (never for timing).
struct Sink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<WatchEvent> events;
  WatchCallback callback() {
    return [this](const WatchEvent& e) {
      std::lock_guard lock(mu);
      events.push_back(e);
      cv.notify_all();
    };
  }
  template <class Pred>
  bool waitFor(Pred pred) {
    std::unique_lock lock(mu);
    bool ok = cv.wait_for(lock, std::chrono::seconds(30), [&] { return pred(events); });
    if (!ok) {
      for (const auto& e : events) UNSCOPED_INFO(static_cast<int>(e.type) << " " << e.object.dump());
    }
    return ok;
  }
  static size_t count(const std::vector<WatchEvent>& ev, WatchEventType t) {
    size_t n = 0;
    for (const auto& e : ev) n += e.type == t;
    return n;
  }
};

/// A client of the server at `url`, with `o`.
std::unique_ptr<ClusterClient> clientOf(const std::string& url, const HttpClientOptions& o) {
  RestConfig rc;
  rc.server = url;
  auto c = makeHttpClient(rc, o);
  REQUIRE(c.ok());
  return std::move(c).value();
}

struct Fixture {
  api::SystemClock clock;
  MemoryCluster cluster{clock};
  std::unique_ptr<ApiServer> server;
  std::unique_ptr<ClusterClient> client;

  explicit Fixture(ApiServerOptions so = {}) {
    server = std::make_unique<ApiServer>(cluster, so);
    REQUIRE(server->start().ok());
    HttpClientOptions o;
    o.qps = 0;
    o.retryInitialMs = 1;
    o.retryMaxMs = 5;
    o.watchReconnectInitialMs = 1;
    o.watchReconnectMaxMs = 20;
    client = clientOf(server->url(), o);
  }
  ~Fixture() {
    client.reset();
    server->stop();
  }
};

}  // namespace

TEST_CASE("http: create, get, list with pages, update conflict, status patch, delete precondition") {
  Fixture f;
  for (int i = 0; i < 5; ++i) REQUIRE(f.client->create(api::Kind::Node, node("n" + std::to_string(i))).ok());
  auto dup = f.client->create(api::Kind::Node, node("n0"));
  REQUIRE(!dup.ok());
  CHECK(dup.error().code == 409);

  ListOptions lo;
  lo.limit = 2;
  std::vector<std::string> names;
  std::string rv;
  for (;;) {
    auto page = f.client->list(api::Kind::Node, lo);
    REQUIRE(page.ok());
    if (rv.empty()) rv = page->resourceVersion;
    CHECK(page->resourceVersion == rv);  // later pages show the first page's RV
    for (auto& it : page->items) {
      CHECK(it["kind"] == "Node");
      names.push_back(it["metadata"]["name"]);
    }
    if (page->continueToken.empty()) break;
    lo.continueToken = page->continueToken;
  }
  CHECK(names == std::vector<std::string>{"n0", "n1", "n2", "n3", "n4"});

  auto got = f.client->get(api::Kind::Node, "", "n1");
  REQUIRE(got.ok());
  Json stale = *got;
  Json fresh = *got;
  fresh["metadata"]["labels"] = {{"a", "b"}};
  REQUIRE(f.client->update(api::Kind::Node, fresh).ok());
  auto conflict = f.client->update(api::Kind::Node, stale);
  REQUIRE(!conflict.ok());
  CHECK(conflict.error().code == 409);

  REQUIRE(f.client->create(api::Kind::Pod, pod("p")).ok());
  Json cond = {{"status", {{"conditions", {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}}}}}}};
  auto patched = f.client->patch(api::Kind::Pod, "default", "p", PatchType::StrategicMerge, cond, true);
  REQUIRE(patched.ok());
  CHECK((*patched)["status"]["conditions"][0]["reason"] == "Unschedulable");

  auto missing = f.client->get(api::Kind::Pod, "default", "nope");
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == 404);

  DeleteOptions wrongUid;
  wrongUid.preconditionUid = "not-the-uid";
  auto del = f.client->remove(api::Kind::Pod, "default", "p", wrongUid);
  REQUIRE(!del.ok());
  CHECK(del.error().code == 409);
  REQUIRE(f.client->remove(api::Kind::Pod, "default", "p").ok());
}

TEST_CASE("http: bind, and a second bind is 409") {
  Fixture f;
  REQUIRE(f.client->create(api::Kind::Node, node("n0")).ok());
  auto p = f.client->create(api::Kind::Pod, pod("p"));
  REQUIRE(p.ok());
  const std::string uid = (*p)["metadata"]["uid"];
  REQUIRE(f.client->bind("default", "p", uid, "n0").ok());
  auto again = f.client->bind("default", "p", uid, "n0");
  REQUIRE(!again.ok());
  CHECK(again.error().code == 409);
  auto got = f.client->get(api::Kind::Pod, "default", "p");
  REQUIRE(got.ok());
  CHECK((*got)["spec"]["nodeName"] == "n0");
}

TEST_CASE("http: watch streams events from the list's RV, with bookmarks") {
  ApiServerOptions so;
  so.bookmarkIntervalMs = 5;
  Fixture f(so);
  auto listed = f.client->list(api::Kind::Pod);
  REQUIRE(listed.ok());
  Sink sink;
  auto w = f.client->watch(api::Kind::Pod, listed->resourceVersion, sink.callback());
  REQUIRE(w.ok());
  for (int i = 0; i < 20; ++i) REQUIRE(f.client->create(api::Kind::Pod, pod("p" + std::to_string(i))).ok());
  REQUIRE(f.client->remove(api::Kind::Pod, "default", "p3").ok());
  REQUIRE(sink.waitFor([](const auto& ev) {
    return Sink::count(ev, WatchEventType::Added) == 20 && Sink::count(ev, WatchEventType::Deleted) == 1 &&
           Sink::count(ev, WatchEventType::Bookmark) > 0;
  }));
  (*w)->stop();
}

TEST_CASE("http: a selected watch: the server filters, and turns leaving and entering into DELETED and ADDED") {
  Fixture f;
  auto pooled = [](const std::string& name, const std::string& pool) {
    Json n = node(name);
    n["metadata"]["labels"] = {{"tessera.dev/node-pool", pool}};
    return n;
  };
  REQUIRE(f.client->create(api::Kind::Node, pooled("n1", "a")).ok());
  ListOptions selectors;
  selectors.labelSelector = "tessera.dev/node-pool=a";
  auto listed = f.client->list(api::Kind::Node, selectors);
  REQUIRE(listed.ok());
  CHECK(listed->items.size() == 1);
  Sink sink;
  auto w = f.client->watchSelected(api::Kind::Node, listed->resourceVersion, selectors, sink.callback());
  REQUIRE(w.ok());
  REQUIRE(f.client->create(api::Kind::Node, pooled("n2", "b")).ok());  // never seen
  auto n1 = f.client->get(api::Kind::Node, "", "n1");
  REQUIRE(n1.ok());
  (*n1)["metadata"]["labels"]["tessera.dev/node-pool"] = "b";
  REQUIRE(f.client->update(api::Kind::Node, *n1).ok());  // leaves pool a
  auto n2 = f.client->get(api::Kind::Node, "", "n2");
  REQUIRE(n2.ok());
  (*n2)["metadata"]["labels"]["tessera.dev/node-pool"] = "a";
  REQUIRE(f.client->update(api::Kind::Node, *n2).ok());  // joins pool a
  REQUIRE(sink.waitFor([](const auto& ev) {
    return Sink::count(ev, WatchEventType::Deleted) == 1 && Sink::count(ev, WatchEventType::Added) == 1;
  }));
  {
    std::lock_guard lock(sink.mu);
    std::vector<std::string> seen;
    for (const auto& e : sink.events)
      if (e.type != WatchEventType::Bookmark)
        seen.push_back(std::string(e.type == WatchEventType::Added ? "ADDED " : e.type == WatchEventType::Deleted ? "DELETED " : "OTHER ") +
                       e.object["metadata"].value("name", ""));
    CHECK(seen == std::vector<std::string>{"DELETED n1", "ADDED n2"});
  }
  (*w)->stop();
}

TEST_CASE("http: a dropped watch reconnects from the last RV and loses nothing") {
  Fixture f;
  auto listed = f.client->list(api::Kind::Pod);
  REQUIRE(listed.ok());
  Sink sink;
  auto w = f.client->watch(api::Kind::Pod, listed->resourceVersion, sink.callback());
  REQUIRE(w.ok());
  REQUIRE(f.client->create(api::Kind::Pod, pod("before")).ok());
  REQUIRE(sink.waitFor([](const auto& ev) { return ev.size() == 1; }));
  f.server->dropWatches();
  // Written while the stream is down (or reconnecting): replayed from the last RV.
  for (int i = 0; i < 5; ++i) REQUIRE(f.client->create(api::Kind::Pod, pod("after" + std::to_string(i))).ok());
  REQUIRE(sink.waitFor([](const auto& ev) { return Sink::count(ev, WatchEventType::Added) == 6; }));
  std::lock_guard lock(sink.mu);
  CHECK(Sink::count(sink.events, WatchEventType::Error) == 0);
  std::set<std::string> names;
  for (auto& e : sink.events) names.insert(e.object["metadata"]["name"].get<std::string>());
  CHECK(names.size() == 6);  // no duplicates, none lost
}

TEST_CASE("http: a compacted RV ends the watch with one Error event (code 410), both server styles") {
  for (bool asStatus : {false, true}) {
    ApiServerOptions so;
    so.goneAsHttpStatus = asStatus;
    INFO("goneAsHttpStatus " << asStatus);
    Fixture f(so);
    REQUIRE(f.client->create(api::Kind::Pod, pod("first")).ok());  // RV "0" would mean "any": start past it
    auto listed = f.client->list(api::Kind::Pod);
    REQUIRE(listed.ok());
    REQUIRE(f.client->create(api::Kind::Pod, pod("a")).ok());
    REQUIRE(f.client->create(api::Kind::Pod, pod("b")).ok());
    f.server->compact();
    Sink sink;
    auto w = f.client->watch(api::Kind::Pod, listed->resourceVersion, sink.callback());
    REQUIRE(w.ok());
    REQUIRE(sink.waitFor([](const auto& ev) { return Sink::count(ev, WatchEventType::Error) == 1; }));
    std::lock_guard lock(sink.mu);
    CHECK(sink.events.back().object["code"] == 410);
  }
}

TEST_CASE("http: 500 and 429 bursts are retried for reads; a POST is retried only on 429") {
  Fixture f;
  REQUIRE(f.client->create(api::Kind::Node, node("n0")).ok());
  f.server->failNextRequests(3, 500);
  CHECK(f.client->get(api::Kind::Node, "", "n0").ok());
  f.server->failNextRequests(3, 429);
  CHECK(f.client->list(api::Kind::Node).ok());
  f.server->failNextRequests(2, 429, "POST");
  CHECK(f.client->create(api::Kind::Pod, pod("p429")).ok());
  f.server->failNextRequests(1, 500, "POST");
  auto r = f.client->create(api::Kind::Pod, pod("p500"));
  REQUIRE(!r.ok());
  CHECK(r.error().code == 500);
  f.server->failNextRequests(0, 500);
}

TEST_CASE("http: a 429's Retry-After is what the client waits before its retry (not its own backoff)") {
  // Request times as the server sees them. The client's own backoff is 1 ms; the server asks for 1 s.
  std::mutex mu;
  std::vector<std::chrono::steady_clock::time_point> seen;
  ApiServerOptions so;
  so.onRequest = [&](const ApiRequestRecord&) {
    std::lock_guard lock(mu);
    seen.push_back(std::chrono::steady_clock::now());
  };
  api::SystemClock clock;
  MemoryCluster cluster{clock};
  ApiServer server(cluster, so);
  REQUIRE(server.start().ok());
  HttpClientOptions o;
  o.retryInitialMs = 1;
  o.retryMaxMs = 30'000;
  auto c = clientOf(server.url(), o);
  server.failNextRequests(1, 429, "GET", 1);
  CHECK(c->list(api::Kind::Node).ok());
  std::lock_guard lock(mu);
  REQUIRE(seen.size() == 2);
  // A sleep is never shorter than asked: without the header the retry would follow in about 1 ms.
  CHECK(seen[1] - seen[0] >= std::chrono::milliseconds(900));
  c.reset();
  server.stop();
}

TEST_CASE("http: a server that is gone is a transport error with code 0") {
  HttpClientOptions o;
  o.maxRetries = 1;
  o.retryInitialMs = 1;
  auto c = clientOf("http://127.0.0.1:1", o);  // nothing listens on port 1
  auto r = c->get(api::Kind::Node, "", "x");
  REQUIRE(!r.ok());
  CHECK(r.error().code == 0);
  CHECK(r.error().message.find("127.0.0.1:1") != std::string::npos);
}

namespace {

/// A server that answers every request on 127.0.0.1 with `status` and `body`, whatever it asks
/// (`status` 0: reads each request and answers none), one connection at a time.
class CannedServer {
 public:
  CannedServer(int status, std::string body) : status_(status), body_(std::move(body)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~CannedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// Requests read whole so far.
  int requests() const { return requests_.load(); }

 private:
  void serve() {
    for (int c; (c = ::accept(fd_, nullptr, nullptr)) >= 0;) {
      const timeval bound{10, 0};  // a client that keeps its connection open does not hold the test
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
      std::string in;
      char buf[4096];
      for (;;) {  // one request after another on the connection: head, then Content-Length bytes
        size_t head = in.find("\r\n\r\n");
        while (head == std::string::npos) {
          const ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          in.append(buf, static_cast<size_t>(n));
          head = in.find("\r\n\r\n");
        }
        if (head == std::string::npos) break;
        size_t length = 0;
        if (const size_t at = in.find("Content-Length: "); at != std::string::npos && at < head)
          length = std::stoul(in.substr(at + 16));
        while (in.size() < head + 4 + length) {
          const ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          in.append(buf, static_cast<size_t>(n));
        }
        if (in.size() < head + 4 + length) break;
        in.erase(0, head + 4 + length);
        ++requests_;
        if (status_ == 0) continue;  // no answer: the client gives up and closes
        const std::string out = "HTTP/1.1 " + std::to_string(status_) + " X\r\nContent-Type: application/json\r\n" +
                                "Content-Length: " + std::to_string(body_.size()) + "\r\n\r\n" + body_;
        if (::send(c, out.data(), out.size(), MSG_NOSIGNAL) < 0) break;
      }
      ::close(c);
    }
  }
  int status_;
  std::string body_;
  std::atomic<int> requests_{0};
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_CASE("http: a bind's and a delete's answers are not read; an object's answer must be JSON") {
  // A server that accepts everything and answers with what is not JSON: the bind and the delete
  // happened (2xx) whatever the body says; a create needs the object back.
  CannedServer server(201, "not json");
  HttpClientOptions o;
  o.maxRetries = 0;
  auto c = clientOf(server.url(), o);
  CHECK(c->bind("default", "p", "uid-p", "n0").ok());
  CHECK(c->remove(api::Kind::Pod, "default", "p", DeleteOptions{}).ok());
  auto created = c->create(api::Kind::Pod, pod("p"));
  REQUIRE(!created.ok());
  CHECK(created.error().message.find("malformed JSON answer") != std::string::npos);
}

TEST_CASE("http: an unanswered request fails after requestTimeoutMs; a POST that was sent is not retried") {
  CannedServer server(0, "");
  HttpClientOptions o;
  o.requestTimeoutMs = 200;
  o.maxRetries = 2;
  o.retryInitialMs = 1;
  o.retryMaxMs = 1;
  auto c = clientOf(server.url(), o);
  auto got = c->get(api::Kind::Node, "", "n0");
  REQUIRE(!got.ok());
  CHECK(got.error().code == 0);
  CHECK_THAT(got.error().message, Catch::Contains("timeout"));
  CHECK(server.requests() == 3);  // a GET is tried again: once and twice more
  auto bound = c->bind("default", "p", "uid-p", "n0");
  REQUIRE(!bound.ok());
  CHECK(bound.error().code == 0);
  CHECK(server.requests() == 4);  // the binding reached the server: it may have been made, not sent again
}
