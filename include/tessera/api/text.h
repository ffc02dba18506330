#pragma once
/// Small text helpers for error messages that quote what a user wrote.
#include <string>
#include <string_view>

namespace tessera::api {

/// `"value"`, with control characters, quotes and backslashes escaped (\xNN) and anything past
/// 64 bytes cut to "...": safe to put a user's bad value into a message, log line or event.
std::string quoteValue(std::string_view value);

}  // namespace tessera::api
