#pragma once
/// Client-side flow control for the HTTP client, kept free of I/O and of the wall clock so it can be
/// tested with plain numbers: a token bucket (QPS with a burst) and an exponential backoff with jitter.
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <random>

namespace tessera::cache {

/// Token bucket: `qps` tokens per second, at most `burst` banked. Thread-safe.
/// reserve() takes a token now or books the next free one and says how long to wait for it, so
/// concurrent callers queue fairly without a lock held while they wait. qps <= 0 means unlimited.
class TokenBucket {
 public:
  TokenBucket(double qps, int burst) : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)) {}

  /// `nowNanos` is any monotonic time; returns the nanoseconds the caller must wait before sending.
  int64_t reserve(int64_t nowNanos) {
    if (qps_ <= 0) return 0;
    std::lock_guard lock(mu_);
    if (!started_) {
      last_ = nowNanos;
      started_ = true;
    }
    if (nowNanos > last_) {
      tokens_ = std::min<double>(burst_, tokens_ + (nowNanos - last_) * qps_ / 1e9);
      last_ = nowNanos;
    }
    tokens_ -= 1;
    if (tokens_ >= 0) return 0;
    return static_cast<int64_t>(-tokens_ / qps_ * 1e9);
  }

 private:
  std::mutex mu_;
  const double qps_;
  const int burst_;
  double tokens_;
  int64_t last_ = 0;
  bool started_ = false;
};

/// Exponential backoff: initial, doubled per failure up to max, each delay drawn uniformly from
/// [delay/2, delay] ("equal jitter") so that many clients do not retry in lockstep. Not thread-safe.
class Backoff {
 public:
  Backoff(int64_t initialMillis, int64_t maxMillis, uint64_t seed)
      : initial_(initialMillis), max_(maxMillis), rng_(seed) {}
  /// The delay before the next attempt, in milliseconds.
  int64_t next() {
    const int64_t d = std::min(max_, initial_ << std::min(attempt_, 30));
    ++attempt_;
    std::uniform_int_distribution<int64_t> dist(d / 2, d);
    return dist(rng_);
  }
  void reset() { attempt_ = 0; }
  int attempts() const { return attempt_; }

 private:
  int64_t initial_, max_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace tessera::cache
