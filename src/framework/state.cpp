// The usage history's buckets (state.h). Integrals are doubles: time x amount overflows nothing
// there, and decay is exponential; what leaves the timeaware plugin is rounded to integers.
#include "tessera/framework/state.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace tessera::framework {

namespace {

using Json = nlohmann::json;

int64_t floorTo(int64_t t, int64_t step) {
  const int64_t r = t % step;
  return r < 0 ? t - r - step : t - r;
}

}  // namespace

int64_t usageBucketMillis(api::Duration window) { return std::max<int64_t>(1000, window.millis / 60); }

void UsageHistory::fold(int64_t from, int64_t to, const Sample& held) {
  for (int64_t t = from; t < to;) {
    const int64_t start = floorTo(t, bucketMillis_);
    const int64_t end = std::min(to, start + bucketMillis_);
    if (buckets_.empty() || buckets_.back().start < start) {
      Bucket b;
      b.start = start;
      b.from = t;
      b.to = t;
      buckets_.push_back(std::move(b));
    }
    Bucket& b = buckets_.back();  // time only moves forward: the newest bucket is this one
    const double dt = static_cast<double>(end - t);
    b.from = std::min(b.from, t);
    b.to = std::max(b.to, end);
    for (int r = 0; r < 3; ++r) b.capacity[r] += static_cast<double>(held.capacity[r]) * dt;
    for (const auto& [q, a] : held.held) {
      auto& u = b.used[q];
      for (int r = 0; r < 3; ++r) u[r] += static_cast<double>(a[r]) * dt;
    }
    t = end;
  }
}

void UsageHistory::rebucket(int64_t bucketMillis) {
  std::deque<Bucket> old = std::move(buckets_);
  buckets_.clear();
  bucketMillis_ = bucketMillis;
  // Each old bucket's integrals are spread over the new buckets its recorded part overlaps, pro rata.
  std::map<int64_t, Bucket> next;
  for (const Bucket& b : old) {
    if (b.to <= b.from) continue;
    const double span = static_cast<double>(b.to - b.from);
    for (int64_t t = b.from; t < b.to;) {
      const int64_t start = floorTo(t, bucketMillis_);
      const int64_t end = std::min(b.to, start + bucketMillis_);
      const double f = static_cast<double>(end - t) / span;
      auto [it, added] = next.try_emplace(start);
      Bucket& n = it->second;
      if (added) {
        n.start = start;
        n.from = t;
        n.to = end;
      }
      n.from = std::min(n.from, t);
      n.to = std::max(n.to, end);
      for (int r = 0; r < 3; ++r) n.capacity[r] += b.capacity[r] * f;
      for (const auto& [q, u] : b.used) {
        auto& nu = n.used[q];
        for (int r = 0; r < 3; ++r) nu[r] += u[r] * f;
      }
      t = end;
    }
  }
  for (auto& [start, b] : next) buckets_.push_back(std::move(b));
}

void UsageHistory::record(Sample s, api::Duration window) {
  const int64_t length = usageBucketMillis(window);
  if (bucketMillis_ != length) rebucket(length);
  const int64_t now = s.at.unixMillis;
  if (last_ && last_->at.unixMillis < now) {
    // A long gap (a scheduler down for days) folds only what the window can still see.
    const int64_t from = std::max(last_->at.unixMillis, now - window.millis - bucketMillis_);
    fold(from, now, *last_);
  }
  last_ = std::move(s);  // also when the clock went back: the newest reading holds, nothing folded
  const int64_t horizon = now - window.millis;
  while (!buckets_.empty() && buckets_.front().start + bucketMillis_ <= horizon) buckets_.pop_front();
}

std::map<std::string, UsageHistory::Integrals> UsageHistory::usage(api::Time now, api::Duration window,
                                                                   api::Duration halfLife) const {
  const int64_t from = now.unixMillis - window.millis;
  std::map<std::string, Integrals> used;
  Integrals capacity{0, 0, 0};
  for (const Bucket& b : buckets_) {
    const int64_t start = std::max(b.from, from), end = std::min(b.to, now.unixMillis);
    if (end <= start || b.to <= b.from) continue;
    double weight = static_cast<double>(end - start) / static_cast<double>(b.to - b.from);
    if (halfLife.millis > 0) {
      const double mid = (static_cast<double>(start) + static_cast<double>(end)) / 2;
      weight *= std::exp2(-(static_cast<double>(now.unixMillis) - mid) / static_cast<double>(halfLife.millis));
    }
    for (int r = 0; r < 3; ++r) capacity[r] += b.capacity[r] * weight;
    for (const auto& [q, u] : b.used) {
      auto& out = used[q];
      for (int r = 0; r < 3; ++r) out[r] += u[r] * weight;
    }
  }
  for (auto& [q, u] : used)
    for (int r = 0; r < 3; ++r) u[r] = capacity[r] > 0 ? u[r] / capacity[r] : 0;
  return used;
}

// ---- the saved form ----

Json UsageHistory::toJson() const {
  Json j = {{"version", 1}, {"bucketMillis", bucketMillis_}};
  if (last_) {
    Json held = Json::object();
    for (const auto& [q, a] : last_->held) held[q] = a;
    j["last"] = {{"at", last_->at.unixMillis}, {"held", std::move(held)}, {"capacity", last_->capacity}};
  }
  Json buckets = Json::array();
  for (const Bucket& b : buckets_) {
    Json used = Json::object();
    for (const auto& [q, u] : b.used) used[q] = u;
    buckets.push_back(
        {{"start", b.start}, {"from", b.from}, {"to", b.to}, {"capacity", b.capacity}, {"used", std::move(used)}});
  }
  j["buckets"] = std::move(buckets);
  return j;
}

namespace {

template <class T>
api::Status readTriple(const Json& j, const std::string& field, std::array<T, 3>& out) {
  if (!j.is_array() || j.size() != 3) return api::makeError(field + ": want an array of 3 numbers");
  for (size_t i = 0; i < 3; ++i) {
    if (!j[i].is_number()) return api::makeError(field + "[" + std::to_string(i) + "]: want a number");
    if constexpr (std::is_integral_v<T>) {
      if (!j[i].is_number_integer()) return api::makeError(field + "[" + std::to_string(i) + "]: want an integer");
    }
    out[i] = j[i].get<T>();
  }
  return api::Status::success();
}

api::Status readInt(const Json& j, const char* key, const std::string& where, int64_t& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return api::makeError(where + key + ": want an integer");
  out = it->get<int64_t>();
  return api::Status::success();
}

}  // namespace

api::Result<UsageHistory> UsageHistory::fromJson(const Json& j) {
  if (!j.is_object()) return api::makeError("usage history: want an object");
  int64_t version = 0;
  TESSERA_TRY(readInt(j, "version", "", version));
  if (version != 1) return api::makeError("version: " + std::to_string(version) + " is not supported (want 1)");
  UsageHistory h;
  TESSERA_TRY(readInt(j, "bucketMillis", "", h.bucketMillis_));
  if (h.bucketMillis_ < 0) return api::makeError("bucketMillis: must not be negative");
  if (auto it = j.find("last"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return api::makeError("last: want an object");
    Sample s;
    TESSERA_TRY(readInt(*it, "at", "last.", s.at.unixMillis));
    TESSERA_TRY(readTriple(it->value("capacity", Json()), "last.capacity", s.capacity));
    const Json held = it->value("held", Json::object());
    if (!held.is_object()) return api::makeError("last.held: want an object");
    for (const auto& [q, a] : held.items()) TESSERA_TRY(readTriple(a, "last.held." + q, s.held[q]));
    h.last_ = std::move(s);
  }
  const Json buckets = j.value("buckets", Json::array());
  if (!buckets.is_array()) return api::makeError("buckets: want an array");
  for (size_t i = 0; i < buckets.size(); ++i) {
    const Json& e = buckets[i];
    const std::string where = "buckets[" + std::to_string(i) + "].";
    if (!e.is_object()) return api::makeError("buckets[" + std::to_string(i) + "]: want an object");
    Bucket b;
    TESSERA_TRY(readInt(e, "start", where, b.start));
    TESSERA_TRY(readInt(e, "from", where, b.from));
    TESSERA_TRY(readInt(e, "to", where, b.to));
    if (h.bucketMillis_ <= 0 || b.from < b.start || b.to < b.from || b.to > b.start + h.bucketMillis_)
      return api::makeError(where + "from/to: outside the bucket");
    if (!h.buckets_.empty() && h.buckets_.back().start >= b.start)
      return api::makeError(where + "start: buckets must be in ascending order");
    TESSERA_TRY(readTriple(e.value("capacity", Json()), where + "capacity", b.capacity));
    const Json used = e.value("used", Json::object());
    if (!used.is_object()) return api::makeError(where + "used: want an object");
    for (const auto& [q, u] : used.items()) TESSERA_TRY(readTriple(u, where + "used." + q, b.used[q]));
    h.buckets_.push_back(std::move(b));
  }
  return h;
}

}  // namespace tessera::framework
