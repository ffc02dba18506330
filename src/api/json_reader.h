#pragma once
// JsonReader: the typed, error-reporting view of Kubernetes JSON that the converters read through.
// A reader stands on one value inside one object and knows the way there (its parent and its key or
// index), so a converter writes `spec.read("nodeName", pod.nodeName)` and an error still reads
// "<Kind> <ns>/<name>: <field path>: <problem>", e.g.
// "Pod team-a/big-0: spec.containers[0].resources.requests.cpu: negative quantity \"-1\"".
// The path is only spelled out when an error is built, so reading a valid object allocates nothing
// for paths.
//
// Every accessor checks the JSON type before reading, so nlohmann does not throw on well-formed JSON
// values. Private to tessera_api (the public entry points are in tessera/api/convert.h).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/clock.h"
#include "tessera/api/objects.h"
#include "tessera/api/result.h"

namespace tessera::api {

/// "null", "object", "array", "string", "boolean", "integer", "number": how errors name a JSON type.
std::string jsonTypeName(const nlohmann::json& j);
/// `"s"`: how errors quote a value.
std::string quote(std::string_view s);
/// "Pod team-a/big-0" or "Queue default" for error messages; `fallbackKind` when the JSON names no
/// kind (list items), "object" when that is empty too; "<unnamed>" when it has no name.
std::string describeJson(const nlohmann::json& j, std::string_view fallbackKind);

/// A position in one JSON object: a value (possibly absent) and its field path.
///
/// Lifetime: a reader refers to its parent reader, to the JSON and to the object description; all of
/// them must outlive it. Keep readers in locals of the converter that walks the object (children of a
/// temporary reader dangle). Copying a reader is cheap (a few pointers).
class JsonReader {
 public:
  /// The reader of a whole object, whose errors start with `object` ("Pod team-a/big-0: ...").
  JsonReader(const nlohmann::json& root, const std::string& object) : value_(&root), object_(&object) {}

  /// False when the member is absent or null (a null member counts as not set, as in Kubernetes).
  explicit operator bool() const { return value_ != nullptr && !value_->is_null(); }
  /// The value (a null JSON value when absent).
  const nlohmann::json& json() const;
  /// The member's key ("" for the root and list elements).
  std::string_view key() const { return step_ == Step::kMember ? key_ : std::string_view(); }
  /// The field path: "spec.containers[0].resources", "metadata.labels[\"app\"]"; "(root)" for the root.
  std::string path() const;

  /// "<object>: <path>: <problem>", code 422.
  Error error(std::string_view problem) const;
  /// "... expected <want>, got <JSON type of this value>".
  Error typeError(std::string_view want) const;

  /// The member `key`: absent when this is not an object or the member is absent. Never fails.
  JsonReader member(std::string_view key) const;
  /// The member `key`, which must be an object when present.
  Result<JsonReader> object(std::string_view key) const;
  /// The member `key`, which must be a list when present.
  Result<JsonReader> list(std::string_view key) const;

  /// Calls `f(element)` (returning Status) for each element of this list, each of which must be an
  /// object; stops at the first error. Nothing when absent.
  template <class F>
  Status forEachObject(F&& f) const;
  /// forEachObject over the list member `key` (an error when it is present and not a list).
  template <class F>
  Status forEachObject(std::string_view key, F&& f) const {
    TESSERA_ASSIGN_OR_RETURN(const JsonReader items, list(key));
    return items.forEachObject(f);
  }
  /// Calls `f(member)` (returning Status) for each member of this object in key order, null values
  /// included; stops at the first error. Nothing when absent or not an object.
  template <class F>
  Status forEachMember(F&& f) const;

  // Scalar members: an absent (or null) member leaves `out` as it is; a present one of the wrong type
  // or out of range is an error naming it.
  Status read(std::string_view key, std::string& out) const;
  Status read(std::string_view key, bool& out) const;
  Status read(std::string_view key, int64_t& out) const;
  Status read(std::string_view key, int32_t& out) const;
  Status read(std::string_view key, std::optional<int64_t>& out) const;
  Status read(std::string_view key, std::optional<int32_t>& out) const;
  /// An RFC 3339 time string.
  Status read(std::string_view key, std::optional<Time>& out) const;
  /// A duration string ("90s", "1h30m").
  Status read(std::string_view key, std::optional<Duration>& out) const;
  /// A map of strings; entries are added to `out`.
  Status read(std::string_view key, StringMap& out) const;
  /// A list of strings; elements are appended to `out`.
  Status read(std::string_view key, std::vector<std::string>& out) const;

  /// This value as an integer in [lo, hi]; floats, other types and values out of range are errors.
  Result<int64_t> integer(int64_t lo, int64_t hi) const;
  /// Quantity text of this value: strings as written, numbers as their decimal text.
  Result<std::string> quantityText() const;
  /// This value as a quantity in thousandths (`milli`) or in base units rounded up.
  Result<int64_t> quantity(bool milli) const;

 private:
  enum class Step : uint8_t { kRoot, kMember, kElement, kMapKey };
  JsonReader(const nlohmann::json* value, const JsonReader& parent, Step step, std::string_view key, size_t index)
      : value_(value), object_(parent.object_), parent_(&parent), key_(key), index_(index), step_(step) {}
  JsonReader element(size_t i) const { return JsonReader(&(*value_)[i], *this, Step::kElement, {}, i); }
  void appendPath(std::string& out) const;

  const nlohmann::json* value_ = nullptr;  ///< null when absent
  const std::string* object_;
  const JsonReader* parent_ = nullptr;
  std::string_view key_;  ///< member key (kMember) or map key (kMapKey)
  size_t index_ = 0;      ///< list index (kElement)
  Step step_ = Step::kRoot;
};

template <class F>
Status JsonReader::forEachObject(F&& f) const {
  if (!*this) return {};
  for (size_t i = 0; i < value_->size(); ++i) {
    const JsonReader e = element(i);
    if (!e.value_->is_object()) return e.typeError("an object");
    TESSERA_TRY(f(e));
  }
  return {};
}

template <class F>
Status JsonReader::forEachMember(F&& f) const {
  if (!*this || !value_->is_object()) return {};
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    TESSERA_TRY(f(JsonReader(&it.value(), *this, Step::kMember, it.key(), 0)));
  }
  return {};
}

}  // namespace tessera::api
