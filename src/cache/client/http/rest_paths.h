#pragma once
// REST coordinates shared by the HTTP client and the test API server (no Asio here).
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/api/kinds.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache::http {

/// "/api/v1" or "/apis/GROUP/VERSION".
std::string groupPrefix(api::Kind kind);
/// The collection: ".../namespaces/NS/PLURAL" (NS empty: all namespaces, or cluster-scoped).
std::string collectionPath(api::Kind kind, const std::string& ns);
/// One object, optionally a subresource ("status", "binding").
std::string objectPath(api::Kind kind, const std::string& ns, const std::string& name,
                       const std::string& subresource = {});

/// Percent-encoding for query values and decoding for the server.
std::string urlEncode(std::string_view s);
std::string urlDecode(std::string_view s);
/// "a=1&b=x%20y" -> {a: 1, b: "x y"}.
std::map<std::string, std::string> parseQuery(std::string_view q);

/// A Kubernetes Status object (the body of every error answer).
Json statusJson(int code, const std::string& message);
/// The reason Kubernetes gives for an HTTP code ("NotFound", "Conflict", "Expired", ...).
const char* reasonFor(int code);
/// The message of an error body (a Status) or the body itself when it is not one.
std::string messageOf(const std::string& body);

/// A parsed request path: which kind, namespace, name and subresource it addresses.
struct ResourcePath {
  api::Kind kind = api::Kind::Pod;
  std::string ns, name, subresource;
};
std::optional<ResourcePath> parseResourcePath(std::string_view path);

}  // namespace tessera::cache::http
