#include "rest_paths.h"

#include <cctype>
#include <cstdio>
#include <exception>
#include <vector>

namespace tessera::cache::http {

std::string groupPrefix(api::Kind kind) {
  const api::KindInfo& ki = api::kindInfo(kind);
  if (ki.group.empty()) return "/api/" + std::string(ki.version);
  return "/apis/" + std::string(ki.group) + "/" + std::string(ki.version);
}

std::string collectionPath(api::Kind kind, const std::string& ns) {
  const api::KindInfo& ki = api::kindInfo(kind);
  std::string p = groupPrefix(kind);
  if (ki.namespaced && !ns.empty()) p += "/namespaces/" + urlEncode(ns);
  return p + "/" + std::string(ki.plural);
}

std::string objectPath(api::Kind kind, const std::string& ns, const std::string& name, const std::string& subresource) {
  std::string p = collectionPath(kind, ns) + "/" + urlEncode(name);
  if (!subresource.empty()) p += "/" + subresource;
  return p;
}

std::string urlEncode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

std::string urlDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      auto hexv = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      int a = hexv(s[i + 1]), b = hexv(s[i + 2]);
      if (a >= 0 && b >= 0) {
        out.push_back(static_cast<char>(a * 16 + b));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i] == '+' ? ' ' : s[i]);
  }
  return out;
}

std::map<std::string, std::string> parseQuery(std::string_view q) {
  std::map<std::string, std::string> out;
  while (!q.empty()) {
    auto amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string_view::npos) out[urlDecode(part)] = "";
    else out[urlDecode(part.substr(0, eq))] = urlDecode(part.substr(eq + 1));
  }
  return out;
}

const char* reasonFor(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return code >= 500 ? "InternalError" : "BadRequest";
  }
}

Json statusJson(int code, const std::string& message) {
  std::string reason = reasonFor(code);
  if (code == 409 && message.find("already exists") != std::string::npos) reason = "AlreadyExists";
  return Json{{"kind", "Status"},   {"apiVersion", "v1"}, {"metadata", Json::object()},
              {"status", code < 300 ? "Success" : "Failure"}, {"message", message}, {"reason", reason},
              {"code", code}};
}

std::string messageOf(const std::string& body) {
  try {
    Json j = Json::parse(body);
    if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
  } catch (const std::exception&) {
  }
  return body.size() > 200 ? body.substr(0, 200) + "..." : body;
}

std::optional<ResourcePath> parseResourcePath(std::string_view path) {
  std::vector<std::string> parts;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    auto slash = path.find('/');
    parts.push_back(urlDecode(path.substr(0, slash)));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  std::string group, version;
  size_t i = 0;
  if (parts.size() >= 2 && parts[0] == "api") {
    version = parts[1];
    i = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    group = parts[1];
    version = parts[2];
    i = 3;
  } else {
    return std::nullopt;
  }
  ResourcePath rp;
  if (i + 1 < parts.size() && parts[i] == "namespaces" && i + 2 < parts.size()) {
    rp.ns = parts[i + 1];
    i += 2;
  }
  if (i >= parts.size()) return std::nullopt;
  const std::string& plural = parts[i++];
  bool found = false;
  for (api::Kind k : api::kAllKinds) {
    const api::KindInfo& ki = api::kindInfo(k);
    if (ki.plural == plural && ki.group == group && ki.version == version) {
      rp.kind = k;
      found = true;
      break;
    }
  }
  if (!found) return std::nullopt;
  if (i < parts.size()) rp.name = parts[i++];
  if (i < parts.size()) rp.subresource = parts[i++];
  if (i < parts.size()) return std::nullopt;
  return rp;
}

}  // namespace tessera::cache::http
