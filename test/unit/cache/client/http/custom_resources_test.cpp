// CRD-defined kinds on the test API server, over real HTTP on 127.0.0.1: a CRD created by a client
// makes its kind served (REST verbs, watch, discovery, Table columns) until the CRD is deleted.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

#include "tessera/api/clock.h"
#include "tessera/cache/http_server.h"
#include "tessera/cache/memory_cluster.h"

using namespace tessera;
using namespace tessera::cache;

namespace {

/// One HTTP/1.1 connection to 127.0.0.1:port (reads time out after 30 s: a safety net, not timing).
class Connection {
 public:
  explicit Connection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    timeval tv{30, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~Connection() { ::close(fd_); }

  void send(const std::string& method, const std::string& target, const std::string& body,
            const std::string& contentType, const std::string& accept) {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAccept: " + accept +
                      "\r\n";
    if (!body.empty()) req += "Content-Type: " + contentType + "\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    REQUIRE(::write(fd_, req.data(), req.size()) == static_cast<ssize_t>(req.size()));
  }
  /// Reads until `needle` is in what arrived (or the peer closes, when `needle` is empty).
  const std::string& readUntil(const std::string& needle) {
    char buf[4096];
    while (needle.empty() || got_.find(needle) == std::string::npos) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      got_.append(buf, static_cast<size_t>(n));
    }
    return got_;
  }

 private:
  int fd_ = -1;
  std::string got_;
};

struct Reply {
  int code = 0;
  Json body;
};

/// The body of an HTTP answer, chunked or not.
std::string bodyOf(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return "";
  const std::string head = raw.substr(0, end);
  std::string body = raw.substr(end + 4);
  if (head.find("chunked") == std::string::npos) return body;
  std::string out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t eol = body.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(body.substr(at, eol - at), nullptr, 16);
    if (n == 0) break;
    out += body.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

Reply call(uint16_t port, const std::string& method, const std::string& target, const Json& body = Json(),
           const std::string& contentType = "application/json", const std::string& accept = "application/json") {
  Connection c(port);
  c.send(method, target, body.is_null() ? "" : body.dump(), contentType, accept);
  const std::string raw = c.readUntil("");
  Reply r;
  if (raw.size() > 12) r.code = std::stoi(raw.substr(9, 3));
  const std::string text = bodyOf(raw);
  r.body = Json::parse(text, nullptr, false);
  INFO(method << " " << target << " -> " << r.code << " " << text);
  return r;
}

Json widgetCrd() {
  return Json{{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "widgets.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"scope", "Namespaced"},
                {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}, {"shortNames", {"wd"}}}},
                {"versions",
                 {{{"name", "v1"},
                   {"served", true},
                   {"storage", true},
                   {"additionalPrinterColumns", {{{"name", "Colour"}, {"type", "string"}, {"jsonPath", ".spec.colour"}}}},
                   {"schema",
                    {{"openAPIV3Schema",
                      {{"type", "object"},
                       {"properties",
                        {{"spec",
                          {{"type", "object"},
                           {"properties", {{"colour", {{"type", "string"}}}, {"size", {{"type", "integer"}}}}}}}}}}}}}}}}}}};
}

Json widget(const std::string& name) {
  return Json{{"apiVersion", "example.com/v1"},
              {"kind", "Widget"},
              {"metadata", {{"name", name}, {"labels", {{"app", "demo"}}}}},
              {"spec", {{"colour", "blue"}, {"size", 3}}}};
}

const Json* findResource(const Json& list, const std::string& name) {
  for (const Json& r : list.at("resources"))
    if (r.at("name") == name) return &r;
  return nullptr;
}

constexpr const char* kCrds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
constexpr const char* kWidgets = "/apis/example.com/v1/namespaces/team/widgets";

}  // namespace

TEST_CASE("http: a CRD makes its kind served: REST verbs, watch, discovery, Table; deleting it stops that") {
  api::SystemClock clock;
  MemoryCluster cluster(clock);
  ApiServer server(cluster);
  REQUIRE(server.start().ok());
  const uint16_t port = server.port();

  CHECK(call(port, "GET", kWidgets).code == 404);
  Reply crd = call(port, "POST", kCrds, widgetCrd());
  REQUIRE(crd.code == 201);
  bool established = false;
  for (const Json& c : crd.body.at("status").at("conditions"))
    established = established || (c.at("type") == "Established" && c.at("status") == "True");
  CHECK(established);

  // Discovery: the group, and the resource with its names.
  Reply groups = call(port, "GET", "/apis");
  bool listed = false;
  for (const Json& g : groups.body.at("groups")) listed = listed || g.at("name") == "example.com";
  CHECK(listed);
  Reply resources = call(port, "GET", "/apis/example.com/v1");
  REQUIRE(resources.code == 200);
  const Json* widgets = findResource(resources.body, "widgets");
  REQUIRE(widgets);
  CHECK(widgets->at("shortNames") == Json::array({"wd"}));
  CHECK(widgets->at("kind") == "Widget");
  CHECK(widgets->at("namespaced") == true);

  // A watch from the (empty) list's RV sees what follows.
  Reply empty = call(port, "GET", kWidgets);
  REQUIRE(empty.code == 200);
  CHECK(empty.body.at("items").empty());
  const std::string rv = empty.body.at("metadata").at("resourceVersion");
  Connection watch(port);
  watch.send("GET", std::string(kWidgets) + "?watch=true&resourceVersion=" + rv, "", "", "application/json");

  Reply created = call(port, "POST", kWidgets, widget("blue-one"));
  REQUIRE(created.code == 201);
  CHECK(created.body.at("metadata").at("namespace") == "team");
  CHECK_FALSE(created.body.at("metadata").value("uid", "").empty());
  CHECK(call(port, "POST", kWidgets, widget("blue-one")).code == 409);
  Reply got = call(port, "GET", std::string(kWidgets) + "/blue-one");
  REQUIRE(got.code == 200);
  CHECK(got.body.at("spec").at("colour") == "blue");

  // Label selectors, and the Table kubectl asks for with the CRD's printer column.
  CHECK(call(port, "GET", std::string(kWidgets) + "?labelSelector=app%3Ddemo").body.at("items").size() == 1);
  CHECK(call(port, "GET", std::string(kWidgets) + "?labelSelector=app%3Dother").body.at("items").empty());
  Reply table = call(port, "GET", "/apis/example.com/v1/widgets", Json(), "",
                     "application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
  REQUIRE(table.code == 200);
  CHECK(table.body.at("kind") == "Table");
  CHECK(table.body.at("columnDefinitions").at(1).at("name") == "Colour");
  CHECK(table.body.at("rows").at(0).at("cells") == Json::array({"blue-one", "blue"}));

  // Merge and JSON patches; an unknown field by the CRD's schema under Strict.
  Reply merged = call(port, "PATCH", std::string(kWidgets) + "/blue-one", Json{{"spec", {{"colour", "red"}}}},
                      "application/merge-patch+json");
  REQUIRE(merged.code == 200);
  CHECK(merged.body.at("spec").at("colour") == "red");
  CHECK(merged.body.at("spec").at("size") == 3);
  Reply patched = call(port, "PATCH", std::string(kWidgets) + "/blue-one",
                       Json::array({{{"op", "replace"}, {"path", "/spec/size"}, {"value", 5}}}),
                       "application/json-patch+json");
  REQUIRE(patched.code == 200);
  CHECK(patched.body.at("spec").at("size") == 5);
  Json typo = widget("typo");
  typo["spec"]["shade"] = "dark";
  Reply strict = call(port, "POST", std::string(kWidgets) + "?fieldValidation=Strict", typo);
  CHECK(strict.code == 400);
  CHECK(strict.body.value("message", "").find("unknown field \"spec.shade\"") != std::string::npos);

  CHECK(call(port, "DELETE", std::string(kWidgets) + "/blue-one").code == 200);
  CHECK(call(port, "GET", std::string(kWidgets) + "/blue-one").code == 404);

  const std::string& events = watch.readUntil("\"DELETED\"");
  CHECK(events.find("\"ADDED\"") != std::string::npos);
  CHECK(events.find("\"MODIFIED\"") != std::string::npos);
  CHECK(events.find("\"DELETED\"") != std::string::npos);
  CHECK(events.find("blue-one") != std::string::npos);

  // Deleting the CRD deletes its objects and stops serving the kind.
  REQUIRE(call(port, "POST", kWidgets, widget("left-over")).code == 201);
  CHECK(call(port, "DELETE", std::string(kCrds) + "/widgets.example.com").code == 200);
  CHECK(call(port, "GET", kWidgets).code == 404);
  CHECK(call(port, "GET", "/apis/example.com/v1/widgets").code == 404);
  CHECK(call(port, "GET", "/apis/example.com/v1").code == 404);
  REQUIRE(call(port, "POST", kCrds, widgetCrd()).code == 201);
  CHECK(call(port, "GET", kWidgets).body.at("items").empty());
  server.stop();
}

TEST_CASE("http: a CRD of a kind Tessera serves already is stored and changes nothing") {
  api::SystemClock clock;
  MemoryCluster cluster(clock);
  ApiServer server(cluster);
  REQUIRE(server.start().ok());
  const uint16_t port = server.port();
  const Json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
                    {"kind", "CustomResourceDefinition"},
                    {"metadata", {{"name", "pytorchjobs.kubeflow.org"}}},
                    {"spec",
                     {{"group", "kubeflow.org"},
                      {"scope", "Namespaced"},
                      {"names", {{"plural", "pytorchjobs"}, {"kind", "PyTorchJob"}}},
                      {"versions", {{{"name", "v1"}, {"served", true}, {"storage", true}}}}}}};
  REQUIRE(call(port, "POST", kCrds, crd).code == 201);
  CHECK(call(port, "GET", std::string(kCrds) + "/pytorchjobs.kubeflow.org").code == 200);
  Reply resources = call(port, "GET", "/apis/kubeflow.org/v1");
  size_t pytorchjobs = 0;
  for (const Json& r : resources.body.at("resources")) pytorchjobs += r.at("name") == "pytorchjobs";
  CHECK(pytorchjobs == 1);
  const Json job = {{"apiVersion", "kubeflow.org/v1"},
                    {"kind", "PyTorchJob"},
                    {"metadata", {{"name", "train"}, {"namespace", "team"}}},
                    {"spec", Json::object()}};
  REQUIRE(call(port, "POST", "/apis/kubeflow.org/v1/namespaces/team/pytorchjobs", job).code == 201);
  CHECK(cluster.get(api::Kind::PyTorchJob, "team", "train").ok());  // stored by the MemoryCluster, as before
  // A CRD whose name is not plural.group is refused, as a real server does.
  Json bad = crd;
  bad["metadata"]["name"] = "pytorch.kubeflow.org";
  CHECK(call(port, "POST", kCrds, bad).code == 422);
  CHECK(call(port, "DELETE", std::string(kCrds) + "/pytorchjobs.kubeflow.org").code == 200);
  CHECK(call(port, "GET", "/apis/kubeflow.org/v1/namespaces/team/pytorchjobs/train").code == 200);
  server.stop();
}
