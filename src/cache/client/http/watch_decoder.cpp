#include "tessera/cache/watch_decoder.h"

#include <exception>

namespace tessera::cache {

const char* WatchDecoder::typeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::Added: return "ADDED";
    case WatchEventType::Modified: return "MODIFIED";
    case WatchEventType::Deleted: return "DELETED";
    case WatchEventType::Bookmark: return "BOOKMARK";
    case WatchEventType::Error: return "ERROR";
  }
  return "ERROR";
}

api::Result<WatchEvent> WatchDecoder::decodeEvent(std::string_view text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const std::exception& e) {
    return api::makeError(std::string("watch stream: malformed JSON: ") + e.what());
  }
  if (!j.is_object()) return api::makeError("watch stream: an event must be a JSON object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return api::makeError("watch stream: event without a string \"type\"");
  const std::string type = t->get<std::string>();
  WatchEvent ev;
  if (type == "ADDED") ev.type = WatchEventType::Added;
  else if (type == "MODIFIED") ev.type = WatchEventType::Modified;
  else if (type == "DELETED") ev.type = WatchEventType::Deleted;
  else if (type == "BOOKMARK") ev.type = WatchEventType::Bookmark;
  else if (type == "ERROR") ev.type = WatchEventType::Error;
  else return api::makeError("watch stream: unknown event type \"" + type + "\"");
  auto o = j.find("object");
  if (o == j.end() || !o->is_object()) return api::makeError("watch stream: " + type + " event without an \"object\"");
  ev.object = std::move(*o);
  return ev;
}

api::Result<std::vector<WatchEvent>> WatchDecoder::feed(std::string_view bytes) {
  if (failed_) return api::makeError("watch stream: decoder used after an error");
  std::vector<WatchEvent> out;
  buffer_.append(bytes);
  for (; scanned_ < buffer_.size(); ++scanned_) {
    const char c = buffer_[scanned_];
    if (inString_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') inString_ = false;
      continue;
    }
    if (depth_ == 0) {
      // Between objects only whitespace may appear; anything else starts (or breaks) an object.
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        start_ = scanned_ + 1;
        continue;
      }
      if (c != '{') {
        failed_ = true;
        return api::makeError(std::string("watch stream: unexpected character '") + c + "' between events");
      }
      start_ = scanned_;
    }
    if (c == '"') inString_ = true;
    else if (c == '{' || c == '[') ++depth_;
    else if (c == '}' || c == ']') {
      if (--depth_ == 0) {
        auto ev = decodeEvent(std::string_view(buffer_).substr(start_, scanned_ + 1 - start_));
        if (!ev.ok()) {
          failed_ = true;
          return ev.error();
        }
        out.push_back(std::move(ev).value());
        start_ = scanned_ + 1;
      } else if (depth_ < 0) {
        failed_ = true;
        return api::makeError("watch stream: unbalanced brackets");
      }
    }
  }
  // Keep only the incomplete tail; compact when the consumed prefix dominates.
  if (start_ > 0 && (start_ == buffer_.size() || start_ > buffer_.size() / 2)) {
    buffer_.erase(0, start_);
    scanned_ -= start_;
    start_ = 0;
  }
  return out;
}

}  // namespace tessera::cache
