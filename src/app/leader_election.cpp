#include "tessera/app/leader_election.h"

#include <cstdio>

#include "tessera/api/log.h"

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

bool LeaderElector::leadingAt(api::Time now) const { return leading_ && now - lastRenew_ < options_.renewDeadline; }

bool LeaderElector::isLeader() const {
  std::lock_guard lock(mu_);
  return leadingAt(clock_.now());
}

uint64_t LeaderElector::fencingEpoch() const {
  std::lock_guard lock(mu_);
  return leadingAt(clock_.now()) ? epoch_ : 0;
}

std::string LeaderElector::observedHolder() const {
  std::lock_guard lock(mu_);
  return observedHolder_;
}

void LeaderElector::renewed(api::Time at) {
  std::lock_guard lock(mu_);
  if (!leadingAt(at)) ++epoch_;  // a new term: what an earlier one queued stays fenced off
  leading_ = true;
  lastRenew_ = at;
  observedHolder_ = options_.identity;
}

void LeaderElector::lost() {
  std::lock_guard lock(mu_);
  leading_ = false;
}

void LeaderElector::reportError(const char* what, const api::Error& e) {
  // Once per kind of failure (the request and its code): a Lease the RBAC does not grant (403)
  // would otherwise fail silently every retryPeriod, and the replica would never lead.
  std::string key = std::string(what) + " " + std::to_string(e.code);  // the same failure, whatever its text
  if (key == lastError_) return;
  log::warning("leader election: ", what, " Lease ", options_.namespace_, "/", options_.name, ": ", e.message,
               " (retrying every ", api::formatDuration(options_.retryPeriod), ")");
  lastError_ = std::move(key);
}

bool LeaderElector::tryAcquireOrRenew() {
  // `now` is taken before the request: a renew counts from when it was sent, never later.
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
    if (created.ok()) renewed(now), lastError_.clear();
    else if (created.error().code != 409) reportError("creating", created.error());
    return isLeader();
  }
  if (!got.ok()) {
    reportError("reading", got.error());
    return isLeader();  // keep leading until renewDeadline passes; then stop
  }
  Json lease = std::move(got).value();
  Json& spec = lease["spec"];
  if (!spec.is_object()) spec = Json::object();
  const std::string holder = spec.value("holderIdentity", "");
  {
    std::lock_guard lock(mu_);
    observedHolder_ = holder;
  }
  if (!holder.empty() && holder != options_.identity) {
    // Someone else holds it. Its record changes at each of its renewals; take over only once it
    // has not changed for its leaseDurationSeconds, timed by our clock from when we saw it change.
    const int64_t seconds = spec.value("leaseDurationSeconds", durationSeconds);
    const std::string record = holder + "|" + spec.value("renewTime", std::string()) + "|" +
                               lease["metadata"].value("resourceVersion", std::string());
    bool expired;
    {
      std::lock_guard lock(mu_);
      leading_ = false;
      if (record != observedRecord_) {
        observedRecord_ = record;
        observedAt_ = now;
      }
      expired = now >= observedAt_ + api::Duration{seconds * 1000};
    }
    if (!expired) return false;
  }
  if (holder != options_.identity) {
    spec["acquireTime"] = formatMicroTime(now);
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + (holder.empty() ? 0 : 1);
  }
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = durationSeconds;
  spec["renewTime"] = formatMicroTime(now);
  auto updated = client_.update(api::Kind::Lease, lease);  // carries the RV we read: 409 if it moved
  if (updated.ok()) renewed(now), lastError_.clear();
  else if (updated.error().code == 409) lost();
  else reportError("updating", updated.error());
  return isLeader();
}

void LeaderElector::release() {
  {
    std::lock_guard lock(mu_);
    if (!leading_) return;
    leading_ = false;
  }
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
