// libFuzzer target: the incremental watch-stream decoder (src/cache/client/http). The stream is fed
// whole to one decoder and in pieces (sizes from the first byte) to another; when both accept the
// stream they must agree on the events.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tessera/cache/watch_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tessera::cache::WatchDecoder;
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 17;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);

  WatchDecoder whole;
  auto all = whole.feed(stream);
  (void)whole.pending();
  (void)WatchDecoder::decodeEvent(stream);

  WatchDecoder pieces;
  size_t events = 0;
  bool failed = false;
  std::vector<tessera::cache::WatchEventType> types;
  for (size_t at = 0; at < stream.size() && !failed; at += piece) {
    auto got = pieces.feed(stream.substr(at, std::min(piece, stream.size() - at)));
    if (!got.ok()) {
      failed = true;
      (void)pieces.feed("{}");  // used after an error: must be an error, not a crash
      break;
    }
    events += got->size();
    for (const auto& e : *got) types.push_back(e.type);
  }
  if (all.ok() && !failed) {
    if (all->size() != events || pieces.pending() != whole.pending()) __builtin_trap();
    for (size_t i = 0; i < events; ++i)
      if ((*all)[i].type != types[i]) __builtin_trap();
  }
  return 0;
}
