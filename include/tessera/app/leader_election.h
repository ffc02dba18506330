#pragma once
/// Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
/// acquire or renew by PUT with the resourceVersion read last (409 = someone else won); take over
/// a lease held by another only when its record (holder, renewTime, resourceVersion) has not
/// changed for leaseDurationSeconds, timed from when we saw it change: the Lease's own times are
/// compared with each other, never with our clock, so clocks need not agree.
///
/// Fencing: every term of leadership gets a new epoch. fencingEpoch() is that epoch while the last
/// successful renew is younger than renewDeadline, else 0; the binder and the status writer ask it
/// right before each write, so an ex-leader (renewals paused, partitioned) writes nothing after its
/// deadline, and since renewDeadline < leaseDuration, before anyone may take over.
#include <cstdint>
#include <mutex>
#include <string>

#include "tessera/api/clock.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::app {

struct LeaseOptions {
  std::string namespace_ = "kube-system";
  std::string name = "tessera";
  std::string identity;                  ///< unique per process (hostname + pid)
  api::Duration leaseDuration{15'000};   ///< how long others wait before taking over
  api::Duration renewDeadline{10'000};   ///< a leader that has not renewed for this long stops leading
  api::Duration retryPeriod{2'000};      ///< between attempts (acquire or renew)
};

/// One thread calls tryAcquireOrRenew() every retryPeriod and release(); isLeader(),
/// fencingEpoch() and observedHolder() may be called from any thread (the leader flag, the renew
/// time and the epoch change together under one lock).
class LeaderElector {
 public:
  LeaderElector(cache::ClusterClient& client, const api::Clock& clock, LeaseOptions options);

  /// One round: creates the Lease if missing, renews it if ours, takes it over if expired.
  /// Returns whether we lead after this round (false on any API error once renewDeadline passed).
  bool tryAcquireOrRenew();
  /// Leading: the last successful renew is younger than renewDeadline.
  bool isLeader() const;
  /// The current term's epoch (1, 2, ...) while leading, 0 otherwise.
  uint64_t fencingEpoch() const;
  /// Gives the lease up (graceful shutdown): holder cleared so another takes over at once.
  void release();
  /// Who holds the lease as last read ("" when unknown or free).
  std::string observedHolder() const;
  const LeaseOptions& options() const { return options_; }

 private:
  void renewed(api::Time at);  ///< a create or update of ours succeeded (starts a term if none)
  void lost();                 ///< another holder won
  bool leadingAt(api::Time now) const;  ///< mu_ held
  /// Logs an API error of the electing thread once, until another request or code fails or a write
  /// succeeds.
  void reportError(const char* what, const api::Error& e);

  cache::ClusterClient& client_;
  const api::Clock& clock_;
  LeaseOptions options_;
  mutable std::mutex mu_;
  bool leading_ = false;
  api::Time lastRenew_{};
  uint64_t epoch_ = 0;
  std::string observedHolder_;
  // The other holder's record as last seen, and when (our clock) it last changed.
  std::string observedRecord_;
  api::Time observedAt_{};
  std::string lastError_;  ///< the last failure reported ("request code"; "" after a success)
};

/// RFC 3339 with microseconds, as metav1.MicroTime wants it.
std::string formatMicroTime(api::Time t);

}  // namespace tessera::app
