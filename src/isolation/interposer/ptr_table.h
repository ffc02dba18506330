#pragma once
/// Lock-free, fixed-capacity map from an allocation handle (device pointer, array handle, ...) to
/// its charge, so a free finds the size to credit in O(1).
///
/// Open addressing with linear probing over at most kMaxProbe slots. Slots go EMPTY -> live ->
/// TOMBSTONE -> live ...; they never return to EMPTY, so a lookup may stop at the first EMPTY
/// slot. An insert claims the first EMPTY or TOMBSTONE slot of its window with a CAS on the key;
/// a remove CASes the key to TOMBSTONE, so of two racing frees of one pointer only one credits.
///
/// Thread-safety: all operations may run concurrently. Keys must be unique while live (the driver
/// never returns one pointer twice without a free in between). Capacity: an insert fails when all
/// kMaxProbe slots of its window are live; the caller then undoes the allocation (fail closed).
/// Zero-initialised storage is a valid empty table, so a static instance needs no constructor.

#include <atomic>
#include <cstdint>

namespace tessera::interposer {

template <unsigned kBits>
class PtrTable {
 public:
  static constexpr std::uint64_t kCapacity = 1ULL << kBits;
  static constexpr unsigned kMaxProbe = 64;

  /// Records `value` (non-zero) for `key`. Returns false if the window is full.
  bool insert(std::uint64_t key, std::uint64_t value) {
    const std::uint64_t stored = encode(key);
    if (stored == kTombstone) return false;
    const std::uint64_t home = hash(key);
    for (unsigned i = 0; i < kMaxProbe; ++i) {
      Slot& slot = slots_[(home + i) & (kCapacity - 1)];
      std::uint64_t current = slot.key.load(std::memory_order_acquire);
      while (current == kEmpty || current == kTombstone) {
        if (slot.key.compare_exchange_weak(current, stored, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
          // Only the owner of a pointer ever looks it up, and only after the allocation call that
          // inserted it has returned, so storing the value after claiming the key is safe.
          slot.value.store(value, std::memory_order_release);
          return true;
        }
      }
    }
    return false;
  }

  /// Removes `key` and returns its value, or 0 if the key is unknown.
  std::uint64_t remove(std::uint64_t key) {
    const std::uint64_t stored = encode(key);
    const std::uint64_t home = hash(key);
    for (unsigned i = 0; i < kMaxProbe; ++i) {
      Slot& slot = slots_[(home + i) & (kCapacity - 1)];
      std::uint64_t current = slot.key.load(std::memory_order_acquire);
      if (current == kEmpty) return 0;
      if (current != stored) continue;
      std::uint64_t value = slot.value.load(std::memory_order_acquire);
      if (slot.key.compare_exchange_strong(current, kTombstone, std::memory_order_acq_rel)) return value;
      return 0;  // a concurrent free of the same pointer won
    }
    return 0;
  }

  /// Returns the value for `key` without removing it, or 0.
  std::uint64_t find(std::uint64_t key) const {
    const std::uint64_t stored = encode(key);
    const std::uint64_t home = hash(key);
    for (unsigned i = 0; i < kMaxProbe; ++i) {
      const Slot& slot = slots_[(home + i) & (kCapacity - 1)];
      std::uint64_t current = slot.key.load(std::memory_order_acquire);
      if (current == kEmpty) return 0;
      if (current == stored) return slot.value.load(std::memory_order_acquire);
    }
    return 0;
  }

 private:
  static constexpr std::uint64_t kEmpty = 0;
  static constexpr std::uint64_t kTombstone = ~0ULL;

  // Keys are stored +1 so that a zero handle is representable; ~0 - 1 is not.
  static constexpr std::uint64_t encode(std::uint64_t key) { return key + 1; }
  static constexpr std::uint64_t hash(std::uint64_t key) {
    return (key * 0x9E3779B97F4A7C15ULL) >> (64 - kBits);
  }

  struct Slot {
    std::atomic<std::uint64_t> key;
    std::atomic<std::uint64_t> value;
  };
  Slot slots_[kCapacity] = {};
};

}  // namespace tessera::interposer
