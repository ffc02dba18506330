// The test API server (MemoryCluster over HTTP with Kubernetes REST semantics and fault injection)
// and the daemon's small status server. One HttpConnection type serves both: a request/reply loop, and for
// watches a chunked stream fed from the cluster's watch callback.
#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "connection.h"
#include "custom_resources.h"
#include "discovery.h"
#include "rest_paths.h"
#include "table.h"
#include "../memory/selectors.h"
#include "tessera/api/convert.h"
#include "tessera/cache/field_validation.h"
#include "tessera/cache/http_server.h"
#include "tessera/cache/watch_decoder.h"

namespace tessera::cache {

namespace {

using http::HttpConnection;
using http::Listener;
using http::Request;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;

std::string methodName(const Request& req) { return std::string(req.method_string()); }

/// The request as an RBAC authorizer names it; nullopt when the path names no known resource.
std::optional<ApiRequestRecord> authorizationRecord(const Request& req) {
  const std::string target(req.target());
  const auto q = target.find('?');
  auto rp = http::parseResourcePath(target.substr(0, q));
  if (!rp) return std::nullopt;
  const api::KindInfo& ki = api::kindInfo(rp->kind);
  ApiRequestRecord r{"", std::string(ki.group), std::string(ki.plural), rp->subresource, rp->ns, rp->name};
  switch (req.method()) {
    case bhttp::verb::get: {
      if (!rp->name.empty()) {
        r.verb = "get";
        break;
      }
      auto query = http::parseQuery(q == std::string::npos ? std::string_view() : std::string_view(target).substr(q + 1));
      r.verb = query["watch"] == "true" || query["watch"] == "1" ? "watch" : "list";
      break;
    }
    case bhttp::verb::post: r.verb = "create"; break;
    case bhttp::verb::put: r.verb = "update"; break;
    case bhttp::verb::patch: r.verb = "patch"; break;
    case bhttp::verb::delete_: r.verb = rp->name.empty() ? "deletecollection" : "delete"; break;
    default: r.verb = methodName(req); break;
  }
  return r;
}

}  // namespace

// =====================================================================================================
// ApiServer

struct ApiServer::Impl : std::enable_shared_from_this<ApiServer::Impl> {
  MemoryCluster& cluster;
  ApiServerOptions options;
  http::CustomResources customs;  ///< CRDs and the kinds they define beyond api::Kind
  std::unique_ptr<Listener> listener;
  std::unique_ptr<net::steady_timer> kubeletTimer;

  std::mutex mu;
  int failCount = 0;
  int failCode = 500;
  std::string failMethod;
  int failRetryAfter = -1;
  int64_t delayMs = 0;
  std::set<api::Kind> notServed;  ///< setServed(kind, false), under mu
  bool served(api::Kind kind) {
    std::lock_guard lock(mu);
    return !notServed.count(kind);
  }
  std::atomic<uint64_t> requests{0};

  /// An open watch: its connection (kept alive here until it closes) and the cluster's handle.
  struct Watch {
    std::shared_ptr<HttpConnection> connection;
    std::unique_ptr<WatchHandle> handle;
    std::unique_ptr<net::steady_timer> timeout, bookmarks;
  };
  std::mutex watchMu;
  std::map<uint64_t, std::shared_ptr<Watch>> watches;
  uint64_t nextWatch = 0;

  Impl(MemoryCluster& c, ApiServerOptions o) : cluster(c), options(std::move(o)), customs(options.clock) {}

  void handle(const std::shared_ptr<HttpConnection>& s, Request&& req) {
    ++requests;
    int64_t delay;
    {
      std::lock_guard lock(mu);
      delay = delayMs;
      if (failCount > 0 && (failMethod.empty() || failMethod == methodName(req))) {
        --failCount;
        const int code = failCode;
        auto body = http::statusJson(code, "injected failure").dump();
        Headers headers;
        if (failRetryAfter >= 0) headers.emplace_back("Retry-After", std::to_string(failRetryAfter));
        return s->reply(code, "application/json", std::move(body), req.keep_alive(), std::move(headers));
      }
    }
    if (options.writeLatencyMs > 0 && req.method() != bhttp::verb::get) delay = std::max(delay, options.writeLatencyMs);
    if (delay > 0) {
      auto timer = std::make_shared<net::steady_timer>(s->executor(), std::chrono::milliseconds(delay));
      auto self = shared_from_this();
      auto r = std::make_shared<Request>(std::move(req));
      timer->async_wait([self, s, r, timer](beast::error_code) { self->serve(s, std::move(*r)); });
      return;
    }
    serve(s, std::move(req));
  }

  void error(const std::shared_ptr<HttpConnection>& s, const Request& req, int code, const std::string& message) {
    if (code == 0) code = 500;
    s->reply(code, "application/json", http::statusJson(code, message).dump(), req.keep_alive());
  }
  void error(const std::shared_ptr<HttpConnection>& s, const Request& req, const api::Error& e) {
    error(s, req, e.code, e.message);
  }

  using Headers = std::vector<std::pair<std::string, std::string>>;
  void ok(const std::shared_ptr<HttpConnection>& s, const Request& req, int code, const Json& body,
          Headers headers = {}) {
    s->reply(code, "application/json", body.dump(), req.keep_alive(), std::move(headers));
  }

  /// The patch type a Content-Type names; nullopt for none of the three.
  static std::optional<PatchType> patchTypeOf(std::string_view contentType) {
    if (contentType.rfind("application/merge-patch+json", 0) == 0) return PatchType::Merge;
    if (contentType.rfind("application/strategic-merge-patch+json", 0) == 0) return PatchType::StrategicMerge;
    if (contentType.rfind("application/json-patch+json", 0) == 0) return PatchType::JsonPatch;
    return std::nullopt;
  }

  /// A copy of a merge or strategic merge patch without its directives ($patch, $setElementOrder/...,
  /// $retainKeys, $deleteFromPrimitiveList/...): what is left has the object's shape.
  static Json withoutDirectives(const Json& j) {
    if (j.is_array()) {
      Json out = Json::array();
      for (const auto& x : j) out.push_back(withoutDirectives(x));
      return out;
    }
    if (!j.is_object()) return j;
    Json out = Json::object();
    for (const auto& [k, v] : j.items())
      if (k.empty() || k[0] != '$') out[k] = withoutDirectives(v);
    return out;
  }

  /// fieldValidation as a real server does it (Warn when absent): the unknown fields of a create,
  /// update or merge patch body are refused (Strict, 400 "strict decoding error: unknown field ..."),
  /// answered with a Warning header kubectl prints (Warn), or dropped silently (Ignore). The object is
  /// stored as sent: readers ignore fields they do not know.
  static api::Result<Headers> validateFields(api::Kind kind, const Json& body,
                                             const std::map<std::string, std::string>& query) {
    return fieldWarnings(unknownFields(kind, body), query);
  }
  static api::Result<Headers> fieldWarnings(const std::vector<std::string>& unknown,
                                            const std::map<std::string, std::string>& query) {
    auto it = query.find("fieldValidation");
    const std::string mode = it == query.end() || it->second.empty() ? "Warn" : it->second;
    if (mode != "Strict" && mode != "Warn" && mode != "Ignore")
      return api::makeError("invalid fieldValidation \"" + mode + "\": must be Ignore, Warn or Strict", 400);
    if (mode == "Ignore") return Headers{};
    if (unknown.empty()) return Headers{};
    std::string text;
    for (const auto& f : unknown) text += (text.empty() ? "" : ", ") + std::string("unknown field \"") + f + "\"";
    if (mode == "Strict") return api::makeError("strict decoding error: " + text, 400);
    std::string warning;
    for (const auto& f : unknown) {
      // RFC 7234 warn-text: a quoted string, inner quotes escaped.
      warning += (warning.empty() ? "" : ", ") + std::string("299 - \"unknown field \\\"") + f + "\\\"\"";
    }
    return Headers{{"Warning", warning}};
  }

  static api::Time timeNow(const api::Clock* clock) { return clock ? clock->now() : api::SystemClock().now(); }
  api::Time now() const { return timeNow(options.clock); }

  static http::TableRequest tableOf(const Request& req, const std::map<std::string, std::string>& query) {
    auto it = query.find("includeObject");
    const auto accept = req[bhttp::field::accept];
    return http::tableRequest(std::string_view(accept.data(), accept.size()),
                              it == query.end() ? std::string_view() : it->second);
  }

  /// The request body as JSON: JSON, or YAML (one document) when the Content-Type says so.
  static api::Result<Json> parseBody(const Request& req) {
    if (req.body().empty()) return Json();
    const std::string ct(req[bhttp::field::content_type]);
    if (ct.find("yaml") != std::string::npos) {
      auto docs = api::yamlToJson(req.body());
      if (!docs.ok()) return api::makeError("malformed YAML body: " + docs.error().message, 400);
      if (docs->size() != 1) return api::makeError("the YAML body must hold exactly one object", 400);
      return std::move(docs->front());
    }
    try {
      return Json::parse(req.body());
    } catch (const std::exception& e) {
      return api::makeError(std::string("malformed JSON body: ") + e.what(), 400);
    }
  }

  void serve(const std::shared_ptr<HttpConnection>& s, Request&& req) {
    const std::string target(req.target());
    const auto q = target.find('?');
    const std::string path = target.substr(0, q);
    const auto query = http::parseQuery(q == std::string::npos ? std::string_view() : std::string_view(target).substr(q + 1));
    if (req.method() == bhttp::verb::get) {
      if (auto doc = customs.discovery(path, http::discoveryDocument(path))) return ok(s, req, 200, *doc);
    }
    if (auto target = customs.resolve(path)) return serveCustom(s, req, *target, query);
    auto rp = http::parseResourcePath(path);
    if (!rp || !served(rp->kind))
      return error(s, req, 404, "the server could not find the requested resource (" + path + ")");
    const api::KindInfo& ki = api::kindInfo(rp->kind);
    auto parsed = parseBody(req);
    if (!parsed.ok()) return error(s, req, parsed.error());
    Json body = std::move(parsed).value();
    const auto method = req.method();
    if (rp->name.empty()) {
      if (method == bhttp::verb::get) {
        auto w = query.find("watch");
        if (w != query.end() && (w->second == "true" || w->second == "1")) return watch(s, req, *rp, query);
        return list(s, req, *rp, query);
      }
      if (method == bhttp::verb::post) {
        if (!body.is_object()) return error(s, req, 400, "the body must be an object");
        if (ki.namespaced && !rp->ns.empty()) {
          if (!body.contains("metadata") || !body["metadata"].is_object()) body["metadata"] = Json::object();
          const std::string given = body["metadata"].value("namespace", "");
          if (!given.empty() && given != rp->ns)
            return error(s, req, 400, "the namespace of the object does not match the namespace on the request");
          body["metadata"]["namespace"] = rp->ns;
        }
        auto warn = validateFields(rp->kind, body, query);
        if (!warn.ok()) return error(s, req, warn.error());
        auto r = cluster.create(rp->kind, body);
        if (!r.ok()) return error(s, req, r.error());
        return ok(s, req, 201, *r, std::move(warn).value());
      }
      return error(s, req, 405, "method not allowed on a collection");
    }
    if (!rp->subresource.empty() && rp->subresource != "status" &&
        !(rp->subresource == "binding" && rp->kind == api::Kind::Pod))
      return error(s, req, 404, "unknown subresource " + rp->subresource);
    const bool status = rp->subresource == "status";
    switch (method) {
      case bhttp::verb::get: {
        auto r = cluster.get(rp->kind, rp->ns, rp->name);
        if (!r.ok()) return error(s, req, r.error());
        const auto table = tableOf(req, query);
        if (!table.tableVersion.empty())
          return ok(s, req, 200, http::toTable(rp->kind, Json::array({*r}), table, now()));
        return ok(s, req, 200, *r);
      }
      case bhttp::verb::post: {
        if (rp->subresource != "binding") return error(s, req, 405, "POST to an object");
        if (!body.is_object() || !body.contains("target") || !body["target"].is_object())
          return error(s, req, 400, "Binding: target: required");
        std::string uid;
        if (body.contains("metadata") && body["metadata"].is_object()) uid = body["metadata"].value("uid", "");
        const std::string node = body["target"].value("name", "");
        if (node.empty()) return error(s, req, 400, "Binding: target.name: required");
        auto st = cluster.bind(rp->ns, rp->name, uid, node);
        if (!st.ok()) return error(s, req, st.error());
        return ok(s, req, 201, http::statusJson(201, ""));
      }
      case bhttp::verb::put: {
        if (!body.is_object()) return error(s, req, 400, "the body must be an object");
        if (!body.contains("metadata") || !body["metadata"].is_object()) body["metadata"] = Json::object();
        const std::string name = body["metadata"].value("name", "");
        if (name != rp->name)
          return error(s, req, 400, "the name of the object (" + name + ") does not match the name on the URL (" +
                                        rp->name + ")");
        if (ki.namespaced) body["metadata"]["namespace"] = rp->ns;
        auto warn = validateFields(rp->kind, body, query);
        if (!warn.ok()) return error(s, req, warn.error());
        auto r = status ? cluster.updateStatus(rp->kind, body) : cluster.update(rp->kind, body);
        if (!r.ok()) return error(s, req, r.error());
        return ok(s, req, 200, *r, std::move(warn).value());
      }
      case bhttp::verb::patch: {
        const std::string ct(req[bhttp::field::content_type]);
        const auto named = patchTypeOf(ct);
        if (!named)
          return error(s, req, 415, "the body of the request was in an unknown format - accepted media types "
                                    "include: application/json-patch+json, application/merge-patch+json, "
                                    "application/strategic-merge-patch+json");
        const PatchType type = *named;
        if (type == PatchType::StrategicMerge && http::isCustomResource(rp->kind))
          return error(s, req, 415, "strategic merge patch is not supported for custom resources");
        // A JSON patch names paths, not fields: checked only for merge patches (as the shape they have).
        api::Result<Headers> warn = Headers{};
        if (type != PatchType::JsonPatch) warn = validateFields(rp->kind, withoutDirectives(body), query);
        if (!warn.ok()) return error(s, req, warn.error());
        auto r = cluster.patch(rp->kind, rp->ns, rp->name, type, body, status);
        if (!r.ok()) return error(s, req, r.error());
        return ok(s, req, 200, *r, std::move(warn).value());
      }
      case bhttp::verb::delete_: {
        DeleteOptions o;
        if (body.is_object()) {
          if (body.contains("gracePeriodSeconds") && body["gracePeriodSeconds"].is_number_integer())
            o.gracePeriodSeconds = body["gracePeriodSeconds"].get<int64_t>();
          if (body.contains("preconditions") && body["preconditions"].is_object())
            o.preconditionUid = body["preconditions"].value("uid", "");
        }
        auto st = cluster.remove(rp->kind, rp->ns, rp->name, o);
        if (!st.ok()) return error(s, req, st.error());
        return ok(s, req, 200, http::statusJson(200, ""));
      }
      default: return error(s, req, 405, "method not allowed");
    }
  }

  /// A CRD or an object of a kind a CRD defined (custom_resources.h): the same REST verbs, on the
  /// generic store.
  void serveCustom(const std::shared_ptr<HttpConnection>& s, const Request& req, const http::CustomTarget& t,
                   const std::map<std::string, std::string>& query) {
    auto get = [&](const char* k) {
      auto it = query.find(k);
      return it == query.end() ? std::string() : it->second;
    };
    auto parsed = parseBody(req);
    if (!parsed.ok()) return error(s, req, parsed.error());
    Json body = std::move(parsed).value();
    const auto table = tableOf(req, query);
    const std::vector<http::PrinterColumn> columns = t.kind.printerColumns;
    auto asTable = [columns](const Json& items, const http::TableRequest& tr, api::Time at, const std::string& rv = {}) {
      return http::toTable(columns, items, tr, at, rv);
    };
    const auto method = req.method();
    if (t.name.empty()) {
      if (method == bhttp::verb::get) {
        if (get("watch") == "true" || get("watch") == "1") {
          auto fields = memory::FieldSelector::parse(get("fieldSelector"), api::Kind::ConfigMap);
          if (!fields.ok()) return error(s, req, 400, fields.error().message);
          auto self = shared_from_this();
          const std::string kind = t.kind.kind, apiVersion = t.kind.group + "/" + t.version;
          WatchSource source{
              [self, t](const std::string& from, WatchCallback cb) { return self->customs.watch(t, from, std::move(cb)); },
              [asTable](const Json& items, const http::TableRequest& tr, api::Time at) { return asTable(items, tr, at); },
              [self, kind, apiVersion] {
                return Json{{"kind", kind}, {"apiVersion", apiVersion},
                            {"metadata", {{"resourceVersion", self->customs.resourceVersion()}}}};
              },
              std::move(fields).value(), t.kind.namespaced};
          return stream(s, req, t.ns, query, std::move(source));
        }
        auto r = customs.list(t, get("labelSelector"), get("fieldSelector"));
        if (!r.ok()) return error(s, req, r.error());
        if (!table.tableVersion.empty()) return ok(s, req, 200, asTable(r->items, table, now(), r->resourceVersion));
        return ok(s, req, 200, Json{{"kind", t.kind.listKind}, {"apiVersion", t.kind.group + "/" + t.version},
                                    {"metadata", {{"resourceVersion", r->resourceVersion}}},
                                    {"items", std::move(r->items)}});
      }
      if (method == bhttp::verb::post) {
        if (!body.is_object()) return error(s, req, 400, "the body must be an object");
        if (t.kind.namespaced && body.contains("metadata") && body["metadata"].is_object()) {
          const std::string given = body["metadata"].value("namespace", "");
          if (!given.empty() && given != t.ns)
            return error(s, req, 400, "the namespace of the object does not match the namespace on the request");
        }
        auto warn = fieldWarnings(http::CustomResources::unknownFields(t.kind, body), query);
        if (!warn.ok()) return error(s, req, warn.error());
        auto r = customs.create(t, std::move(body));
        if (!r.ok()) return error(s, req, r.error());
        return ok(s, req, 201, *r, std::move(warn).value());
      }
      return error(s, req, 405, "method not allowed on a collection");
    }
    switch (method) {
      case bhttp::verb::get: {
        auto r = customs.get(t);
        if (!r.ok()) return error(s, req, r.error());
        if (!table.tableVersion.empty()) return ok(s, req, 200, asTable(Json::array({*r}), table, now()));
        return ok(s, req, 200, *r);
      }
      case bhttp::verb::put: {
        if (!body.is_object()) return error(s, req, 400, "the body must be an object");
        if (!body.contains("metadata") || !body["metadata"].is_object()) body["metadata"] = Json::object();
        const std::string name = body["metadata"].value("name", "");
        if (name != t.name)
          return error(s, req, 400, "the name of the object (" + name + ") does not match the name on the URL (" +
                                        t.name + ")");
        if (t.kind.namespaced) body["metadata"]["namespace"] = t.ns;
        auto warn = fieldWarnings(http::CustomResources::unknownFields(t.kind, body), query);
        if (!warn.ok()) return error(s, req, warn.error());
        auto r = customs.update(t, std::move(body));
        if (!r.ok()) return error(s, req, r.error());
        return ok(s, req, 200, *r, std::move(warn).value());
      }
      case bhttp::verb::patch: {
        const std::string ct(req[bhttp::field::content_type]);
        // Custom objects take no strategic merge patch; a CRD (a built-in type) does.
        const auto named = patchTypeOf(ct);
        if (!named || (*named == PatchType::StrategicMerge && t.kind.group != "apiextensions.k8s.io"))
          return error(s, req, 415, "the body of the request was in an unknown format - accepted media types "
                                    "include: application/json-patch+json, application/merge-patch+json");
        const PatchType type = *named;
        api::Result<Headers> warn = Headers{};
        if (type != PatchType::JsonPatch)
          warn = fieldWarnings(http::CustomResources::unknownFields(t.kind, withoutDirectives(body)), query);
        if (!warn.ok()) return error(s, req, warn.error());
        auto r = customs.patch(t, type, body);
        if (!r.ok()) return error(s, req, r.error());
        return ok(s, req, 200, *r, std::move(warn).value());
      }
      case bhttp::verb::delete_: {
        auto r = customs.remove(t);
        if (!r.ok()) return error(s, req, r.error());
        return ok(s, req, 200, *r);
      }
      default: return error(s, req, 405, "method not allowed");
    }
  }

  void list(const std::shared_ptr<HttpConnection>& s, const Request& req, const http::ResourcePath& rp,
            const std::map<std::string, std::string>& query) {
    ListOptions o;
    o.namespace_ = rp.ns;
    auto get = [&](const char* k) {
      auto it = query.find(k);
      return it == query.end() ? std::string() : it->second;
    };
    o.labelSelector = get("labelSelector");
    o.fieldSelector = get("fieldSelector");
    o.continueToken = get("continue");
    if (auto l = get("limit"); !l.empty()) {
      try {
        o.limit = std::stoll(l);
      } catch (...) {
        return error(s, req, 400, "limit: not an integer");
      }
    }
    auto r = cluster.list(rp.kind, o);
    if (!r.ok()) return error(s, req, r.error());
    if (const auto table = tableOf(req, query); !table.tableVersion.empty())
      return ok(s, req, 200, http::toTable(rp.kind, r->items, table, now(), r->resourceVersion, r->continueToken));
    const api::KindInfo& ki = api::kindInfo(rp.kind);
    Json meta = {{"resourceVersion", r->resourceVersion}};
    if (!r->continueToken.empty()) meta["continue"] = r->continueToken;
    Json out = {{"kind", std::string(ki.name) + "List"}, {"apiVersion", ki.apiVersion()}, {"metadata", meta},
                {"items", std::move(r->items)}};
    ok(s, req, 200, out);
  }

  std::string currentRv(api::Kind kind) {
    ListOptions o;
    o.limit = 1;
    auto r = cluster.list(kind, o);
    return r.ok() ? r->resourceVersion : std::string();
  }

  static std::string frame(WatchEventType type, const Json& object) {
    return Json{{"type", WatchDecoder::typeName(type)}, {"object", object}}.dump() + "\n";
  }

  void watch(const std::shared_ptr<HttpConnection>& s, const Request& req, const http::ResourcePath& rp,
             const std::map<std::string, std::string>& query) {
    auto get = [&](const char* k) {
      auto it = query.find(k);
      return it == query.end() ? std::string() : it->second;
    };
    const api::Kind kind = rp.kind;
    auto fields = memory::FieldSelector::parse(get("fieldSelector"), kind);
    if (!fields.ok()) return error(s, req, 400, fields.error().message);
    // The cluster applies the selectors itself, so objects that start or stop matching arrive as
    // ADDED or DELETED, as kube-apiserver's watch cache sends them (a sharded scheduler relies on it).
    ListOptions selectors;
    selectors.labelSelector = get("labelSelector");
    selectors.fieldSelector = get("fieldSelector");
    auto self = shared_from_this();
    WatchSource source{
        [self, kind, selectors](const std::string& from, WatchCallback cb) {
          return self->cluster.watchSelected(kind, from, selectors, std::move(cb));
        },
        [kind](const Json& items, const http::TableRequest& table, api::Time now) {
          return http::toTable(kind, items, table, now);
        },
        [self, kind] { return self->bookmark(kind); }, std::move(fields).value(), api::kindInfo(kind).namespaced,
        /*selected=*/true};
    stream(s, req, rp.ns, query, std::move(source));
  }

  /// What a watch stream needs from the store it watches.
  struct WatchSource {
    std::function<api::Result<std::unique_ptr<WatchHandle>>(const std::string& rv, WatchCallback)> start;
    std::function<Json(const Json& items, const http::TableRequest&, api::Time now)> table;
    std::function<Json()> bookmark;
    memory::FieldSelector fields;
    bool namespaced = true;
    bool selected = false;  ///< `start` applies the selectors itself (with ADDED/DELETED transitions)
  };

  void stream(const std::shared_ptr<HttpConnection>& s, const Request& req, const std::string& ns,
              const std::map<std::string, std::string>& query, WatchSource source) {
    auto get = [&](const char* k) {
      auto it = query.find(k);
      return it == query.end() ? std::string() : it->second;
    };
    const std::string rv = get("resourceVersion");
    const bool bookmarks = get("allowWatchBookmarks") == "true";
    int64_t timeoutSeconds = 1800;
    if (auto t = get("timeoutSeconds"); !t.empty()) {
      try {
        timeoutSeconds = std::stoll(t);
      } catch (...) {
        return error(s, req, 400, "timeoutSeconds: not an integer");
      }
    }
    const bool namespaced = source.namespaced;
    auto labels = memory::LabelSelector::parse(get("labelSelector"));
    if (!labels.ok()) return error(s, req, 400, labels.error().message);
    const auto table = tableOf(req, query);
    auto self = shared_from_this();
    const api::Clock* clock = options.clock;
    // Selectors filter the events where `start` did not (custom resources: without the ADDED and
    // DELETED transitions of a real server; kubectl does not need them); a Table request gets
    // one-row Tables.
    auto deliver = [clock, toTable = source.table, table, labels = std::move(labels).value(),
                    fields = std::move(source.fields),
                    selected = source.selected](WatchEventType type, const Json& object) -> std::string {
      if (type != WatchEventType::Bookmark && type != WatchEventType::Error) {
        if (selected) {
          if (!table.tableVersion.empty()) return frame(type, toTable(Json::array({object}), table, timeNow(clock)));
          return frame(type, object);
        }
        const Json& meta = object.contains("metadata") ? object["metadata"] : Json();
        if (!labels.matches(meta.is_object() && meta.contains("labels") ? meta["labels"] : Json()) ||
            !fields.matches(object))
          return {};
        if (!table.tableVersion.empty()) return frame(type, toTable(Json::array({object}), table, timeNow(clock)));
      }
      return frame(type, object);
    };

    // Register the stream first: the cluster replays history synchronously inside watch().
    auto w = std::make_shared<Watch>();
    w->connection = s;
    uint64_t id;
    {
      std::lock_guard lock(watchMu);
      id = nextWatch++;
    }
    std::weak_ptr<HttpConnection> weak = s;
    s->beginStream();
    auto handle = source.start(rv, [weak, ns, namespaced, deliver](const WatchEvent& ev) {
      if (namespaced && !ns.empty() && ev.object.contains("metadata") &&
          ev.object["metadata"].value("namespace", "") != ns)
        return;
      if (auto sp = weak.lock()) sp->push(deliver(ev.type, ev.object));
    });
    if (!handle.ok()) {
      const int code = handle.error().code == 0 ? 500 : handle.error().code;
      s->push(frame(WatchEventType::Error, http::statusJson(code, handle.error().message)));
      s->end(true);
      return;
    }
    w->handle = std::move(handle).value();
    {
      std::lock_guard lock(watchMu);
      watches[id] = w;
    }
    s->onClosed([self, id] { self->forget(id); });
    if (s->closed()) return forget(id);
    w->timeout = std::make_unique<net::steady_timer>(s->executor(), std::chrono::seconds(timeoutSeconds));
    w->timeout->async_wait([weak, mark = source.bookmark, bookmarks](beast::error_code ec) {
      if (ec) return;
      auto sp = weak.lock();
      if (!sp) return;
      if (bookmarks) sp->push(frame(WatchEventType::Bookmark, mark()));
      sp->end(true);
    });
    if (bookmarks && options.bookmarkIntervalMs > 0) scheduleBookmark(w, source.bookmark);
  }

  Json bookmark(api::Kind kind) {
    const api::KindInfo& ki = api::kindInfo(kind);
    return Json{{"kind", std::string(ki.name)},
                {"apiVersion", ki.apiVersion()},
                {"metadata", {{"resourceVersion", currentRv(kind)}}}};
  }

  void scheduleBookmark(const std::shared_ptr<Watch>& w, std::function<Json()> mark) {
    auto sp = w->connection;
    if (!sp) return;
    if (!w->bookmarks) w->bookmarks = std::make_unique<net::steady_timer>(sp->executor());
    w->bookmarks->expires_after(std::chrono::milliseconds(options.bookmarkIntervalMs));
    std::weak_ptr<Watch> ww = w;
    auto self = shared_from_this();
    w->bookmarks->async_wait([self, ww, mark](beast::error_code ec) {
      if (ec) return;
      auto w = ww.lock();
      if (!w) return;
      auto sp = w->connection;
      if (!sp || sp->closed()) return;
      sp->push(frame(WatchEventType::Bookmark, mark()));
      self->scheduleBookmark(w, mark);
    });
  }

  void forget(uint64_t id) {
    std::shared_ptr<Watch> w;
    {
      std::lock_guard lock(watchMu);
      auto it = watches.find(id);
      if (it == watches.end()) return;
      w = std::move(it->second);
      watches.erase(it);
    }
    if (w->handle) w->handle->stop();
    if (w->timeout) w->timeout->cancel();
    if (w->bookmarks) w->bookmarks->cancel();
  }

  void tickKubelet() {
    if (!kubeletTimer) return;
    kubeletTimer->expires_after(std::chrono::milliseconds(options.kubeletPeriodMs));
    std::weak_ptr<Impl> weak = shared_from_this();
    kubeletTimer->async_wait([weak](beast::error_code ec) {
      if (ec) return;
      auto self = weak.lock();
      if (!self) return;
      (void)self->cluster.kubeletTick();
      (void)self->cluster.completeExpired();
      self->tickKubelet();
    });
  }
};

ApiServer::ApiServer(MemoryCluster& cluster, ApiServerOptions options)
    : impl_(std::make_shared<Impl>(cluster, std::move(options))) {}

ApiServer::~ApiServer() { stop(); }

api::Status ApiServer::start() {
  std::weak_ptr<Impl> weak = impl_;
  impl_->listener = std::make_unique<Listener>(
      [weak](const std::shared_ptr<HttpConnection>& s, Request&& req) {
        auto impl = weak.lock();
        if (!impl) return s->close();
        if (impl->options.onRequest || impl->options.authorize)
          if (auto rec = authorizationRecord(req)) {
            if (impl->options.onRequest) impl->options.onRequest(*rec);
            // RBAC enforced as the API server's authorizer would: 403 Forbidden before anything else.
            if (impl->options.authorize && !impl->options.authorize(*rec)) {
              ++impl->requests;
              std::string what = rec->resource + (rec->subresource.empty() ? "" : "/" + rec->subresource);
              return impl->error(s, req, 403,
                                 what + " \"" + rec->name + "\" is forbidden: cannot " + rec->verb + " resource \"" + what +
                                     "\" in API group \"" + rec->apiGroup + "\"" +
                                     (rec->namespace_.empty() ? " at the cluster scope" : " in the namespace \"" + rec->namespace_ + "\""));
            }
          }
        // A watch whose RV is gone is answered 410 before any stream starts when so configured.
        if (impl->options.goneAsHttpStatus && req.method() == bhttp::verb::get) {
          const std::string target(req.target());
          const auto q = target.find('?');
          if (q != std::string::npos) {
            auto query = http::parseQuery(std::string_view(target).substr(q + 1));
            auto rp = http::parseResourcePath(target.substr(0, q));
            if (rp && query["watch"] == "true" && !query["resourceVersion"].empty()) {
              auto probe = impl->cluster.watch(rp->kind, query["resourceVersion"], [](const WatchEvent&) {});
              if (!probe.ok() && probe.error().code == 410) {
                ++impl->requests;
                return impl->error(s, req, 410, probe.error().message);
              }
            }
          }
        }
        impl->handle(s, std::move(req));
      },
      impl_->options.threads);
  TESSERA_TRY(impl_->listener->start(impl_->options.host, impl_->options.port));
  if (impl_->options.kubeletPeriodMs > 0) {
    impl_->kubeletTimer = std::make_unique<net::steady_timer>(net::make_strand(impl_->listener->ioc()));
    net::post(impl_->kubeletTimer->get_executor(), [impl = impl_] { impl->tickKubelet(); });
  }
  return api::Status::success();
}

void ApiServer::stop() {
  if (!impl_->listener) return;
  dropWatches();
  impl_->listener->stop();
  std::map<uint64_t, std::shared_ptr<Impl::Watch>> left;
  {
    std::lock_guard lock(impl_->watchMu);
    left.swap(impl_->watches);
  }
  for (auto& [id, w] : left)
    if (w->handle) w->handle->stop();
  left.clear();  // connections go before the io_context they live on
  impl_->kubeletTimer.reset();
  impl_->listener.reset();
}

uint16_t ApiServer::port() const { return impl_->listener ? impl_->listener->port() : 0; }
std::string ApiServer::url() const { return "http://" + impl_->options.host + ":" + std::to_string(port()); }

void ApiServer::failNextRequests(int n, int code, const std::string& method, int retryAfterSeconds) {
  std::lock_guard lock(impl_->mu);
  impl_->failCount = n;
  impl_->failCode = code;
  impl_->failMethod = method;
  impl_->failRetryAfter = retryAfterSeconds;
}

void ApiServer::delayResponses(int64_t millis) {
  std::lock_guard lock(impl_->mu);
  impl_->delayMs = millis;
}

void ApiServer::setServed(api::Kind kind, bool served) {
  std::lock_guard lock(impl_->mu);
  if (served) impl_->notServed.erase(kind);
  else impl_->notServed.insert(kind);
}

void ApiServer::dropWatches() {
  std::vector<std::shared_ptr<HttpConnection>> connections;
  {
    std::lock_guard lock(impl_->watchMu);
    for (auto& [id, w] : impl_->watches)
      if (w->connection) connections.push_back(w->connection);
  }
  for (auto& s : connections) s->end(false);
}

void ApiServer::compact() {
  impl_->cluster.setWatchWindow(0);
  impl_->cluster.setWatchWindow(10000);
}

size_t ApiServer::openWatches() const {
  std::lock_guard lock(impl_->watchMu);
  return impl_->watches.size();
}

uint64_t ApiServer::requestCount() const { return impl_->requests; }

// =====================================================================================================
// HttpServer

struct HttpServer::Impl {
  HttpHandler handler;
  std::string host;
  uint16_t port;
  std::unique_ptr<Listener> listener;
  int threads = 1;
};

HttpServer::HttpServer(HttpHandler handler, std::string host, uint16_t port, int threads)
    : impl_(std::make_shared<Impl>(Impl{std::move(handler), std::move(host), port, nullptr, threads})) {}

HttpServer::~HttpServer() { stop(); }

api::Status HttpServer::start() {
  std::weak_ptr<Impl> weak = impl_;
  impl_->listener = std::make_unique<Listener>(
      [weak](const std::shared_ptr<HttpConnection>& s, Request&& req) {
        auto impl = weak.lock();
        if (!impl) return s->close();
        const std::string target(req.target());
        HttpReply r;
        try {
          r = impl->handler(std::string(req.method_string()), target.substr(0, target.find('?')));
        } catch (const std::exception& e) {
          r = HttpReply{500, "text/plain", std::string("internal error: ") + e.what() + "\n"};
        }
        s->reply(r.code, r.contentType, std::move(r.body), req.keep_alive());
      },
      impl_->threads);
  return impl_->listener->start(impl_->host, impl_->port);
}

void HttpServer::stop() {
  if (impl_->listener) impl_->listener->stop();
  impl_->listener.reset();
}

uint16_t HttpServer::port() const { return impl_->listener ? impl_->listener->port() : 0; }

}  // namespace tessera::cache
