#include "json_reader.h"

#include <limits>

#include "tessera/api/quantity.h"

namespace tessera::api {

using nlohmann::json;

std::string jsonTypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    default: return "value";
  }
}

std::string quote(std::string_view s) {
  std::string out;  // not "\"" + std::string(s) + ...: GCC 12 warns (-Wrestrict) on that at -O3
  out.reserve(s.size() + 2);
  out.append(1, '"').append(s).append(1, '"');
  return out;
}

namespace {

/// The member `key` of `j` when `j` is an object and the member is present and not null.
const json* presentMember(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string stringMember(const json& j, std::string_view key) {
  const json* v = presentMember(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

std::string describeJson(const json& j, std::string_view fallbackKind) {
  std::string kind = stringMember(j, "kind");
  if (kind.empty()) kind = fallbackKind.empty() ? "object" : std::string(fallbackKind);
  const json* meta = presentMember(j, "metadata");
  std::string name = meta ? stringMember(*meta, "name") : "";
  std::string ns = meta ? stringMember(*meta, "namespace") : "";
  if (name.empty()) name = "<unnamed>";
  return kind + " " + (ns.empty() ? name : ns + "/" + name);
}

// ---- position and errors ----

const json& JsonReader::json() const {
  static const nlohmann::json kNull;
  return value_ ? *value_ : kNull;
}

void JsonReader::appendPath(std::string& out) const {
  if (!parent_) return;  // the root adds nothing: its members' paths start with their key
  parent_->appendPath(out);
  switch (step_) {
    case Step::kMember:
      if (!out.empty()) out += '.';
      out += key_;
      break;
    case Step::kElement: out += "[" + std::to_string(index_) + "]"; break;
    case Step::kMapKey: out += "[" + quote(key_) + "]"; break;
    case Step::kRoot: break;
  }
}

std::string JsonReader::path() const {
  std::string out;  // not "\"" + std::string(s) + ...: GCC 12 warns (-Wrestrict) on that at -O3
  appendPath(out);
  return out.empty() ? "(root)" : out;
}

Error JsonReader::error(std::string_view problem) const {
  return makeError(*object_ + ": " + path() + ": " + std::string(problem), 422);
}

Error JsonReader::typeError(std::string_view want) const {
  return error("expected " + std::string(want) + ", got " + jsonTypeName(json()));
}

// ---- members ----

JsonReader JsonReader::member(std::string_view key) const {
  return JsonReader(value_ ? presentMember(*value_, key) : nullptr, *this, Step::kMember, key, 0);
}

Result<JsonReader> JsonReader::object(std::string_view key) const {
  JsonReader m = member(key);
  if (m && !m.value_->is_object()) return m.typeError("an object");
  return m;
}

Result<JsonReader> JsonReader::list(std::string_view key) const {
  JsonReader m = member(key);
  if (m && !m.value_->is_array()) return m.typeError("a list");
  return m;
}

// ---- scalars ----

Status JsonReader::read(std::string_view key, std::string& out) const {
  const JsonReader m = member(key);
  if (!m) return {};
  if (!m.value_->is_string()) return m.typeError("a string");
  out = m.value_->get<std::string>();
  return {};
}

Status JsonReader::read(std::string_view key, bool& out) const {
  const JsonReader m = member(key);
  if (!m) return {};
  if (!m.value_->is_boolean()) return m.typeError("a boolean");
  out = m.value_->get<bool>();
  return {};
}

Result<int64_t> JsonReader::integer(int64_t lo, int64_t hi) const {
  const nlohmann::json& v = json();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return error("value " + std::to_string(u) + " out of range");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return error("value " + std::to_string(i) + " out of range");
    return i;
  }
  if (v.is_number_float()) return error("expected an integer, got " + v.dump());
  return typeError("an integer");
}

Status JsonReader::read(std::string_view key, int64_t& out) const {
  const JsonReader m = member(key);
  if (!m) return {};
  TESSERA_ASSIGN_OR_RETURN(out, m.integer(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  return {};
}

Status JsonReader::read(std::string_view key, int32_t& out) const {
  const JsonReader m = member(key);
  if (!m) return {};
  TESSERA_ASSIGN_OR_RETURN(const int64_t x,
                           m.integer(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
  out = static_cast<int32_t>(x);
  return {};
}

Status JsonReader::read(std::string_view key, std::optional<int64_t>& out) const {
  if (!member(key)) return {};
  int64_t x = 0;
  TESSERA_TRY(read(key, x));
  out = x;
  return {};
}

Status JsonReader::read(std::string_view key, std::optional<int32_t>& out) const {
  if (!member(key)) return {};
  int32_t x = 0;
  TESSERA_TRY(read(key, x));
  out = x;
  return {};
}

Status JsonReader::read(std::string_view key, std::optional<Time>& out) const {
  const JsonReader m = member(key);
  if (!m) return {};
  if (!m.value_->is_string()) return m.typeError("an RFC 3339 time string");
  auto t = parseTime(m.value_->get_ref<const std::string&>());
  if (!t) return m.error(t.error().message);
  out = *t;
  return {};
}

Status JsonReader::read(std::string_view key, std::optional<Duration>& out) const {
  const JsonReader m = member(key);
  if (!m) return {};
  if (!m.value_->is_string()) return m.typeError("a duration string");
  auto d = parseDuration(m.value_->get_ref<const std::string&>());
  if (!d) return m.error(d.error().message);
  out = *d;
  return {};
}

Status JsonReader::read(std::string_view key, StringMap& out) const {
  const JsonReader m = member(key);
  if (!m) return {};
  if (!m.value_->is_object()) return m.typeError("a map of strings");
  for (auto it = m.value_->begin(); it != m.value_->end(); ++it) {
    const JsonReader entry(&it.value(), m, Step::kMapKey, it.key(), 0);
    if (!it->is_string()) return entry.typeError("a string");
    out[it.key()] = it->get<std::string>();
  }
  return {};
}

Status JsonReader::read(std::string_view key, std::vector<std::string>& out) const {
  TESSERA_ASSIGN_OR_RETURN(const JsonReader items, list(key));
  if (!items) return {};
  for (size_t i = 0; i < items.value_->size(); ++i) {
    const JsonReader e = items.element(i);
    if (!e.value_->is_string()) return e.typeError("a string");
    out.push_back(e.value_->get<std::string>());
  }
  return {};
}

// ---- quantities ----

Result<std::string> JsonReader::quantityText() const {
  const nlohmann::json& v = json();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_float()) return v.dump();  // shortest round-trip text ("0.5", "1e+30"); NaN dumps as null
  return typeError("a quantity (string or number)");
}

Result<int64_t> JsonReader::quantity(bool milli) const {
  TESSERA_ASSIGN_OR_RETURN(const std::string text, quantityText());
  auto q = milli ? parseQuantityMilli(text) : parseQuantityValue(text);
  if (!q) return error(q.error().message);
  return *q;
}

}  // namespace tessera::api
