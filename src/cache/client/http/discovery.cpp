#include "discovery.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <exception>
#include <map>
#include <set>

#include "tessera/api/convert.h"
#include "tessera/api/version.h"

namespace tessera::cache::http {

namespace {

/// The Kubernetes minor version whose API the test server imitates (the kubectl the tests run).
constexpr const char* kServerMinor = "34";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Short names and categories a real API server gives the built-in kinds.
void builtinNames(ResourceFacts& f) {
  switch (f.kind) {
    case api::Kind::Pod: f.shortNames = {"po"}, f.categories = {"all"}; break;
    case api::Kind::Node: f.shortNames = {"no"}; break;
    case api::Kind::Namespace: f.shortNames = {"ns"}; break;
    case api::Kind::ConfigMap: f.shortNames = {"cm"}; break;
    case api::Kind::Event: f.shortNames = {"ev"}; break;
    case api::Kind::PriorityClass: f.shortNames = {"pc"}; break;
    case api::Kind::Job: f.categories = {"all"}; break;
    default: break;
  }
}

/// Reads one CRD manifest into the facts of the kind it defines (the version the server serves).
void readCrd(const EmbeddedFile& file, std::array<ResourceFacts, std::size(api::kAllKinds)>& facts) {
  auto docs = api::yamlToJson(file.text);
  if (!docs.ok()) return;  // the deploy tests validate these files; a broken one adds no facts
  for (const Json& crd : *docs) {
    try {
      const Json& spec = crd.at("spec");
      const Json& names = spec.at("names");
      auto kind = api::kindFromName(names.at("kind").get<std::string>());
      if (!kind || api::kindInfo(*kind).group != spec.at("group").get<std::string>()) continue;
      ResourceFacts& f = facts[static_cast<size_t>(*kind)];
      f.shortNames = names.value("shortNames", std::vector<std::string>{});
      f.categories = names.value("categories", std::vector<std::string>{});
      for (const Json& v : spec.at("versions")) {
        if (v.value("name", "") != api::kindInfo(*kind).version) continue;
        f.statusSubresource = v.contains("subresources") && v["subresources"].contains("status");
        for (const Json& c : v.value("additionalPrinterColumns", Json::array()))
          f.printerColumns.push_back(PrinterColumn{c.value("name", ""), c.value("type", "string"), c.value("format", ""),
                                                   c.value("description", ""), c.value("jsonPath", ""),
                                                   c.value("priority", 0)});
        if (v.contains("schema")) f.schema = v["schema"].value("openAPIV3Schema", Json());
      }
    } catch (const std::exception&) {
      continue;
    }
  }
}

const std::array<ResourceFacts, std::size(api::kAllKinds)>& allFacts() {
  static const auto facts = [] {
    std::array<ResourceFacts, std::size(api::kAllKinds)> out;
    for (api::Kind k : api::kAllKinds) {
      ResourceFacts& f = out[static_cast<size_t>(k)];
      f.kind = k;
      f.statusSubresource = k == api::Kind::Pod || k == api::Kind::Node;
      builtinNames(f);
    }
    for (const EmbeddedFile& file : embeddedCrds()) readCrd(file, out);
    return out;
  }();
  return facts;
}

/// "group/version" -> kinds served there, in enum order; the core group is "v1".
std::map<std::string, std::vector<api::Kind>> groupVersions() {
  std::map<std::string, std::vector<api::Kind>> out;
  for (api::Kind k : api::kAllKinds) out[api::kindInfo(k).apiVersion()].push_back(k);
  return out;
}

Json verbs() { return Json::array({"create", "delete", "get", "list", "patch", "update", "watch"}); }

Json resourceList(const std::string& groupVersion, const std::vector<api::Kind>& kinds) {
  Json resources = Json::array();
  for (api::Kind k : kinds) {
    const api::KindInfo& ki = api::kindInfo(k);
    const ResourceFacts& f = resourceFacts(k);
    Json r = {{"name", ki.plural}, {"singularName", lower(ki.name)}, {"namespaced", ki.namespaced},
              {"kind", ki.name},   {"verbs", verbs()}};
    if (!f.shortNames.empty()) r["shortNames"] = f.shortNames;
    if (!f.categories.empty()) r["categories"] = f.categories;
    resources.push_back(std::move(r));
    if (f.statusSubresource)
      resources.push_back({{"name", std::string(ki.plural) + "/status"}, {"singularName", ""},
                           {"namespaced", ki.namespaced}, {"kind", ki.name},
                           {"verbs", Json::array({"get", "patch", "update"})}});
    if (k == api::Kind::Pod)
      resources.push_back({{"name", "pods/binding"}, {"singularName", ""}, {"namespaced", true}, {"kind", "Binding"},
                           {"verbs", Json::array({"create"})}});
  }
  return {{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", groupVersion}, {"resources", resources}};
}

Json apiGroupList() {
  std::map<std::string, std::vector<std::string>> groups;  // group -> versions
  for (api::Kind k : api::kAllKinds) {
    const api::KindInfo& ki = api::kindInfo(k);
    if (ki.group.empty()) continue;
    auto& versions = groups[std::string(ki.group)];
    if (std::find(versions.begin(), versions.end(), ki.version) == versions.end()) versions.emplace_back(ki.version);
  }
  Json out = Json::array();
  for (const auto& [group, versions] : groups) {
    Json vs = Json::array();
    for (const auto& v : versions) vs.push_back({{"groupVersion", group + "/" + v}, {"version", v}});
    out.push_back({{"name", group}, {"versions", vs}, {"preferredVersion", vs.front()}});
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", out}};
}

// ---- OpenAPI v3 ----

/// The schema name a real server would give the kind ("io.k8s.api.core.v1.Pod" style; for groups
/// with dots, reversed: "dev.tessera.scheduling.v1alpha1.Queue").
std::string schemaName(api::Kind k) {
  const api::KindInfo& ki = api::kindInfo(k);
  if (ki.group.empty()) return "io.k8s.api.core." + std::string(ki.version) + "." + std::string(ki.name);
  std::string group(ki.group), reversed;
  if (group.find('.') == std::string::npos) return "io.k8s.api." + group + "." + std::string(ki.version) + "." +
                                                   std::string(ki.name);
  size_t end = group.size();
  while (true) {
    size_t dot = group.rfind('.', end - 1);
    const size_t start = dot == std::string::npos ? 0 : dot + 1;
    if (!reversed.empty()) reversed += '.';
    reversed += group.substr(start, end - start);
    if (dot == std::string::npos) break;
    end = dot;
  }
  return reversed + "." + std::string(ki.version) + "." + std::string(ki.name);
}

Json gvkExtension(api::Kind k) {
  const api::KindInfo& ki = api::kindInfo(k);
  return Json::array({{{"group", ki.group}, {"version", ki.version}, {"kind", ki.name}}});
}

Json param(const char* name, const char* in, bool required, const char* description) {
  Json p = {{"name", name}, {"in", in}, {"description", description}, {"schema", {{"type", "string"}, {"uniqueItems", true}}}};
  if (required) p["required"] = true;
  return p;
}

Json fieldParams() {
  return Json::array({param("fieldManager", "query", false, "the actor making the change"),
                      param("fieldValidation", "query", false,
                            "Ignore, Warn or Strict: how unknown or duplicate fields are treated")});
}

Json operation(api::Kind k, const std::string& action, const std::string& id, bool withBody, bool patch) {
  const std::string ref = "#/components/schemas/" + schemaName(k);
  Json op = {{"operationId", id},
             {"x-kubernetes-action", action},
             {"x-kubernetes-group-version-kind", gvkExtension(k).front()},
             {"responses", {{"200", {{"description", "OK"}, {"content", {{"application/json", {{"schema", {{"$ref", ref}}}}}}}}}}}};
  if (withBody) {
    Json content = Json::object();
    if (patch) {
      for (const char* ct : {"application/json-patch+json", "application/merge-patch+json"})
        content[ct] = {{"schema", {{"type", "object"}}}};
    } else {
      content["application/json"] = {{"schema", {{"$ref", ref}}}};
      content["application/yaml"] = {{"schema", {{"$ref", ref}}}};
    }
    op["requestBody"] = {{"content", content}};
    op["parameters"] = fieldParams();
  }
  return op;
}

/// The schema of a kind: the CRD's openAPIV3Schema, or for a built-in kind the envelope only
/// (kubectl explain shows its fields; a body is not checked against it).
Json kindSchema(api::Kind k) {
  const ResourceFacts& f = resourceFacts(k);
  const api::KindInfo& ki = api::kindInfo(k);
  Json s = f.schema.is_object()
               ? f.schema
               : Json{{"type", "object"},
                      {"description", std::string(ki.name) + " (served by the Tessera test API server; fields not "
                                                             "described here)"},
                      {"properties",
                       {{"apiVersion", {{"type", "string"}}},
                        {"kind", {{"type", "string"}}},
                        {"metadata", {{"type", "object"}}},
                        {"spec", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}},
                        {"status", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}};
  s["x-kubernetes-group-version-kind"] = gvkExtension(k);
  return s;
}

Json openApiDocument(const std::string& groupVersion, const std::vector<api::Kind>& kinds) {
  Json paths = Json::object(), schemas = Json::object();
  for (api::Kind k : kinds) {
    const api::KindInfo& ki = api::kindInfo(k);
    const std::string prefix = ki.group.empty() ? "/api/" + std::string(ki.version)
                                                : "/apis/" + std::string(ki.group) + "/" + std::string(ki.version);
    const std::string scope = ki.namespaced ? "Namespaced" : "";
    const std::string collection =
        prefix + (ki.namespaced ? "/namespaces/{namespace}/" : "/") + std::string(ki.plural);
    const std::string name(ki.name);
    Json common = Json::array({param("pretty", "query", false, "pretty-print the output")});
    if (ki.namespaced) common.push_back(param("namespace", "path", true, "object name and auth scope"));
    Json list = {{"get", operation(k, "list", "list" + scope + name, false, false)},
                 {"post", operation(k, "post", "create" + scope + name, true, false)},
                 {"parameters", common}};
    Json one = {{"get", operation(k, "get", "read" + scope + name, false, false)},
                {"put", operation(k, "put", "replace" + scope + name, true, false)},
                {"patch", operation(k, "patch", "patch" + scope + name, true, true)},
                {"delete", operation(k, "delete", "delete" + scope + name, false, false)}};
    Json oneParams = common;
    oneParams.push_back(param("name", "path", true, "name of the object"));
    for (const Json& p : fieldParams()) oneParams.push_back(p);
    one["parameters"] = oneParams;
    paths[collection] = std::move(list);
    paths[collection + "/{name}"] = std::move(one);
    schemas[schemaName(k)] = kindSchema(k);
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes"}, {"version", std::string("v1.") + kServerMinor + ".0"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

Json openApiIndex() {
  Json paths = Json::object();
  for (const auto& [gv, kinds] : groupVersions()) {
    const std::string key = gv.find('/') == std::string::npos ? "api/" + gv : "apis/" + gv;
    paths[key] = {{"serverRelativeURL", "/openapi/v3/" + key + "?hash=" + std::string(api::buildVersion())}};
  }
  return {{"paths", paths}};
}

Json versionInfo() {
  return {{"major", "1"},
          {"minor", kServerMinor},
          {"gitVersion", std::string("v1.") + kServerMinor + ".0+tessera-" + std::string(api::buildVersion())},
          {"gitCommit", ""},
          {"gitTreeState", "clean"},
          {"buildDate", "1970-01-01T00:00:00Z"},
          {"goVersion", ""},
          {"compiler", "tessera"},
          {"platform", "linux/amd64"}};
}

}  // namespace

const ResourceFacts& resourceFacts(api::Kind kind) { return allFacts()[static_cast<size_t>(kind)]; }

bool isCustomResource(api::Kind kind) {
  const std::string_view group = api::kindInfo(kind).group;
  return group.find('.') != std::string_view::npos && !group.ends_with(".k8s.io");
}

std::optional<Json> discoveryDocument(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path == "/version") return versionInfo();
  if (path == "/api") return Json{{"kind", "APIVersions"}, {"versions", Json::array({"v1"})},
                                  {"serverAddressByClientCIDRs", Json::array()}};
  if (path == "/apis") return apiGroupList();
  if (path == "/openapi/v3") return openApiIndex();
  const bool openapi = path.starts_with("/openapi/v3/");
  if (openapi) path.remove_prefix(std::string_view("/openapi/v3").size());
  std::string groupVersion;
  if (path.starts_with("/api/")) {
    groupVersion = std::string(path.substr(5));
    if (groupVersion.find('/') != std::string::npos) return std::nullopt;
  } else if (path.starts_with("/apis/")) {
    groupVersion = std::string(path.substr(6));
    if (std::count(groupVersion.begin(), groupVersion.end(), '/') != 1) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const auto gvs = groupVersions();
  auto it = gvs.find(groupVersion);
  if (it == gvs.end()) return std::nullopt;
  return openapi ? openApiDocument(groupVersion, it->second) : resourceList(groupVersion, it->second);
}

}  // namespace tessera::cache::http
