#pragma once
/// Small text helpers for error messages that quote what a user wrote.
#include <string>
#include <string_view>

namespace tessera::api {

/// `"value"`, with control characters, quotes and backslashes escaped (\xNN), bytes that are not
/// UTF-8 replaced (validUtf8) and anything past 64 bytes cut to "..." (never inside a character):
/// safe to put a user's bad value into a message, log line or event.
std::string quoteValue(std::string_view value);

/// `text` with every byte that does not belong to a well-formed UTF-8 character replaced by
/// U+FFFD, as Go's encoding/json writes such strings: JSON (a condition, an Event) must be UTF-8,
/// and a message quoting an annotation or a label may hold anything.
std::string validUtf8(std::string_view text);

}  // namespace tessera::api
