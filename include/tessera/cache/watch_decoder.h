#pragma once
/// Incremental decoder of a Kubernetes watch stream: the body of `GET ...?watch=true` is a sequence
/// of JSON objects `{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}`, usually one per
/// line, arriving in arbitrary pieces (an object can be split across chunks; several can share one).
/// No I/O here: the HTTP client feeds it whatever bytes arrive.
#include <string>
#include <string_view>
#include <vector>

#include "tessera/api/result.h"
#include "tessera/cache/cluster_client.h"

namespace tessera::cache {

/// Not thread-safe; one per stream. Work is linear in the bytes fed: each byte is scanned once.
class WatchDecoder {
 public:
  /// Appends `bytes` and returns every event completed by them, in stream order. A malformed event
  /// (bad JSON, unknown type, no object) is an error naming what was wrong; after an error the
  /// stream is unusable (the caller reconnects).
  api::Result<std::vector<WatchEvent>> feed(std::string_view bytes);
  /// Bytes of an incomplete object held back for the next feed().
  size_t pending() const { return buffer_.size() - start_; }

  /// Decodes one complete event object (also used for the test server's own round trips).
  static api::Result<WatchEvent> decodeEvent(std::string_view text);
  static const char* typeName(WatchEventType type);

 private:
  std::string buffer_;
  size_t start_ = 0;     ///< first byte of the current (incomplete) object
  size_t scanned_ = 0;   ///< bytes already scanned
  int depth_ = 0;        ///< brace/bracket depth of the current object
  bool inString_ = false;
  bool escape_ = false;
  bool failed_ = false;
};

}  // namespace tessera::cache
