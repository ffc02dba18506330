#include "tessera/framework/args.h"

#include <nlohmann/json.hpp>

#include "tessera/api/quantity.h"

namespace tessera::framework {

Args::Args(std::string where, const nlohmann::json* object) : where_(std::move(where)), object_(object) {
  if (object_ && !object_->is_object() && !object_->is_null())
    fail(where_ + ": must be a map of arguments, got " + object_->dump());
  if (object_ && object_->is_null()) object_ = nullptr;
}

void Args::fail(const std::string& message) {
  if (error_.empty()) error_ = message;
}

bool Args::has(const std::string& key) const { return object_ && object_->contains(key); }

std::string Args::getString(const std::string& key, const std::string& def) {
  known_.insert(key);
  if (!has(key)) return def;
  const auto& v = (*object_)[key];
  if (!v.is_string()) {
    fail(where_ + "." + key + ": must be a string, got " + v.dump());
    return def;
  }
  return v.get<std::string>();
}

std::string Args::getEnum(const std::string& key, const std::string& def, std::initializer_list<const char*> allowed) {
  std::string v = getString(key, def);
  for (const char* a : allowed)
    if (v == a) return v;
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  fail(where_ + "." + key + ": unknown value \"" + v + "\" (valid: " + list + ")");
  return def;
}

bool Args::getBool(const std::string& key, bool def) {
  known_.insert(key);
  if (!has(key)) return def;
  const auto& v = (*object_)[key];
  if (!v.is_boolean()) {
    fail(where_ + "." + key + ": must be true or false, got " + v.dump());
    return def;
  }
  return v.get<bool>();
}

int64_t Args::getInt(const std::string& key, int64_t def, int64_t min, int64_t max) {
  known_.insert(key);
  if (!has(key)) return def;
  const auto& v = (*object_)[key];
  if (!v.is_number_integer()) {
    fail(where_ + "." + key + ": must be an integer, got " + v.dump());
    return def;
  }
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max) {
    fail(where_ + "." + key + ": " + std::to_string(x) + " is out of range [" + std::to_string(min) + ", " +
         std::to_string(max) + "]");
    return def;
  }
  return x;
}

int64_t Args::getMilli(const std::string& key, int64_t defMilli, int64_t minMilli, int64_t maxMilli) {
  known_.insert(key);
  if (!has(key)) return defMilli;
  const auto& v = (*object_)[key];
  std::string text;
  if (v.is_number_integer()) text = std::to_string(v.get<int64_t>());
  else if (v.is_number_float()) text = v.dump();
  else if (v.is_string()) text = v.get<std::string>();
  else {
    fail(where_ + "." + key + ": must be a number, got " + v.dump());
    return defMilli;
  }
  auto m = api::parseQuantityMilli(text);
  if (!m.ok()) {
    fail(where_ + "." + key + ": invalid number \"" + text + "\"");
    return defMilli;
  }
  if (*m < minMilli || *m > maxMilli) {
    fail(where_ + "." + key + ": " + text + " is out of range");
    return defMilli;
  }
  return *m;
}

api::Duration Args::getDuration(const std::string& key, api::Duration def) {
  known_.insert(key);
  if (!has(key)) return def;
  const auto& v = (*object_)[key];
  if (!v.is_string()) {
    fail(where_ + "." + key + ": must be a duration string like \"90s\", got " + v.dump());
    return def;
  }
  auto d = api::parseDuration(v.get<std::string>());
  if (!d.ok()) {
    fail(where_ + "." + key + ": invalid duration \"" + v.get<std::string>() + "\"");
    return def;
  }
  return *d;
}

api::Status Args::finish() const {
  if (!error_.empty()) return api::makeError(error_);
  if (!object_) return api::Status::success();
  for (const auto& [k, v] : object_->items()) {
    if (known_.count(k)) continue;
    std::string list;
    for (const auto& n : known_) list += (list.empty() ? "" : ", ") + n;
    return api::makeError(where_ + ": unknown argument \"" + k + "\" (valid: " + (list.empty() ? "none" : list) + ")");
  }
  return api::Status::success();
}

}  // namespace tessera::framework
