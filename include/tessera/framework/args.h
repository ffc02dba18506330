#pragma once
/// Typed access to a plugin's or action's arguments with field-named errors. Used once, when the
/// config loads: a plugin turns its Args into an immutable typed struct ("parse once").
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/api/clock.h"
#include "tessera/api/result.h"

namespace tessera::framework {

/// Reads a JSON object of arguments. Every getter records the key as known; finish() reports the
/// first error (a wrong type, an out-of-range value, or an unknown key, listing the valid keys).
class Args {
 public:
  /// `where` prefixes error messages ("plugins.nodeorder"). `object` may be null (no arguments).
  Args(std::string where, const nlohmann::json* object);

  std::string getString(const std::string& key, const std::string& def);
  /// A string that must be one of `allowed`.
  std::string getEnum(const std::string& key, const std::string& def, std::initializer_list<const char*> allowed);
  bool getBool(const std::string& key, bool def);
  int64_t getInt(const std::string& key, int64_t def, int64_t min, int64_t max);
  /// A decimal number kept in thousandths (so "1.5" -> 1500): fixed point, never floating.
  int64_t getMilli(const std::string& key, int64_t defMilli, int64_t minMilli, int64_t maxMilli);
  api::Duration getDuration(const std::string& key, api::Duration def);
  bool has(const std::string& key) const;
  /// Declares a key as known without reading it (read elsewhere).
  void allow(const std::string& key) { known_.insert(key); }

  /// Errors for unknown keys and for any earlier getter failure.
  api::Status finish() const;

 private:
  void fail(const std::string& message);
  std::string where_;
  const nlohmann::json* object_;
  std::set<std::string> known_;
  std::string error_;
};

}  // namespace tessera::framework
