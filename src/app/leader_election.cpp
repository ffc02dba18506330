#include "tessera/app/leader_election.h"

#include <cstdio>

namespace tessera::app {

using cache::Json;

std::string formatMicroTime(api::Time t) {
  std::string s = api::formatTime(api::Time{t.unixMillis - ((t.unixMillis % 1000) + 1000) % 1000});
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%03lld000", static_cast<long long>(((t.unixMillis % 1000) + 1000) % 1000));
  if (!s.empty() && s.back() == 'Z') s.insert(s.size() - 1, frac);
  return s;
}

LeaderElector::LeaderElector(cache::ClusterClient& client, const api::Clock& clock, LeaseOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

bool LeaderElector::isLeader() const {
  return leading_ && clock_.now() - lastRenew_ < options_.renewDeadline;
}

bool LeaderElector::tryAcquireOrRenew() {
  const api::Time now = clock_.now();
  const int64_t durationSeconds = (options_.leaseDuration.millis + 999) / 1000;
  auto got = client_.get(api::Kind::Lease, options_.namespace_, options_.name);
  if (!got.ok() && got.error().code == 404) {
    Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", options_.name}, {"namespace", options_.namespace_}}},
                  {"spec",
                   {{"holderIdentity", options_.identity},
                    {"leaseDurationSeconds", durationSeconds},
                    {"acquireTime", formatMicroTime(now)},
                    {"renewTime", formatMicroTime(now)},
                    {"leaseTransitions", 0}}}};
    auto created = client_.create(api::Kind::Lease, lease);
    if (created.ok()) {
      leading_ = true;
      lastRenew_ = now;
      observedHolder_ = options_.identity;
    }
    return isLeader();
  }
  if (!got.ok()) return isLeader();  // keep leading until renewDeadline passes; then stop
  Json lease = std::move(got).value();
  Json& spec = lease["spec"];
  if (!spec.is_object()) spec = Json::object();
  const std::string holder = spec.value("holderIdentity", "");
  observedHolder_ = holder;
  if (!holder.empty() && holder != options_.identity) {
    // Someone else holds it: take over only once it expired by our clock.
    int64_t seconds = spec.value("leaseDurationSeconds", durationSeconds);
    api::Time renew{0};
    if (spec.contains("renewTime") && spec["renewTime"].is_string()) {
      auto t = api::parseTime(spec["renewTime"].get<std::string>());
      if (t.ok()) renew = *t;
    }
    leading_ = false;
    if (now < renew + api::Duration{seconds * 1000}) return false;
  }
  if (holder != options_.identity) {
    spec["acquireTime"] = formatMicroTime(now);
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + (holder.empty() ? 0 : 1);
  }
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = durationSeconds;
  spec["renewTime"] = formatMicroTime(now);
  auto updated = client_.update(api::Kind::Lease, lease);  // carries the RV we read: 409 if it moved
  if (updated.ok()) {
    leading_ = true;
    lastRenew_ = now;
    observedHolder_ = options_.identity;
  } else if (updated.error().code == 409) {
    leading_ = false;
  }
  return isLeader();
}

void LeaderElector::release() {
  if (!leading_) return;
  leading_ = false;
  auto got = client_.get(api::Kind::Lease, options_.namespace_, options_.name);
  if (!got.ok()) return;
  Json lease = std::move(got).value();
  if (lease["spec"].value("holderIdentity", "") != options_.identity) return;
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["renewTime"] = formatMicroTime(clock_.now());
  (void)client_.update(api::Kind::Lease, lease);
}

}  // namespace tessera::app
