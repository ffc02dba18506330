#pragma once
/// Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
/// acquire or renew by PUT with the resourceVersion read last (409 = someone else won); take over
/// a lease held by another only when its renewTime + leaseDurationSeconds has passed by our clock.
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

/// Not thread-safe: one thread calls tryAcquireOrRenew() every retryPeriod; isLeader() reads a
/// value that thread maintains (callers on other threads use the daemon's atomic copy).
class LeaderElector {
 public:
  LeaderElector(cache::ClusterClient& client, const api::Clock& clock, LeaseOptions options);

  /// One round: creates the Lease if missing, renews it if ours, takes it over if expired.
  /// Returns whether we lead after this round (false on any API error once renewDeadline passed).
  bool tryAcquireOrRenew();
  /// Leading: the last successful renew is younger than renewDeadline.
  bool isLeader() const;
  /// Gives the lease up (graceful shutdown): holder cleared so another takes over at once.
  void release();
  /// Who holds the lease as last read ("" when unknown or free).
  const std::string& observedHolder() const { return observedHolder_; }
  const LeaseOptions& options() const { return options_; }

 private:
  cache::ClusterClient& client_;
  const api::Clock& clock_;
  LeaseOptions options_;
  bool leading_ = false;
  api::Time lastRenew_{};
  std::string observedHolder_;
};

/// RFC 3339 with microseconds, as metav1.MicroTime wants it.
std::string formatMicroTime(api::Time t);

}  // namespace tessera::app
