#pragma once
/// The daemon's one diagnostics path: every log line of tessera goes through here (no fprintf or
/// std::cerr for diagnostics elsewhere). Severities and verbosity follow klog: info / warning /
/// error, and `log::v(N)` gates detail that only `-v=N` (or more) wants to see.
///
/// Thread-safe: lines from several threads never interleave. The default output is spdlog's
/// (src/api/log.cpp), timestamped, in one of two formats (`--log-format`):
///   text: `I1126 11:25:34.088041 4242] became leader (lease tessera-system/tessera)`, klog's
///         header: severity letter (I, W, E), month and day, UTC time, thread id;
///   json: `{"ts":"2026-11-26T11:25:34.088041Z","level":"info","thread":4242,"msg":"became leader ..."}`
/// on stderr, or on the stream given to setOutput. Tests capture raw messages with setSink.
#include <concepts>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace tessera::log {

enum class Severity { kInfo, kWarning, kError };

/// Where finished lines go. Called with the process-wide log lock held: it must not log itself.
using Sink = std::function<void(Severity, std::string_view message)>;

/// Replaces the sink; an empty function restores the default (spdlog). Returns the previous one.
Sink setSink(Sink sink);

enum class Format { kText, kJson };
/// "text" or "json" (`--log-format`); nullopt for anything else.
std::optional<Format> parseFormat(std::string_view text);
/// The format of the default output (default: text).
void setFormat(Format format);
/// Sends the default output to `out` (flushed after every line) instead of stderr; null: stderr.
/// `out` must outlive its use (call setOutput(nullptr) before it goes).
void setOutput(std::ostream* out);
/// klog's -v: lines logged under v(N) are kept when N <= verbosity (default 0).
void setVerbosity(int level);
int verbosity();
/// True when detail at level N is wanted: `if (log::v(2)) log::info(...)`.
inline bool v(int level) { return level <= verbosity(); }

/// Writes one finished line (no trailing newline) at a severity.
void write(Severity severity, std::string_view message);

namespace detail {
inline void append(std::string& out, std::string_view s) { out.append(s); }
inline void append(std::string& out, const char* s) { out.append(s ? s : "(null)"); }
inline void append(std::string& out, const std::string& s) { out.append(s); }
inline void append(std::string& out, char c) { out.push_back(c); }
inline void append(std::string& out, bool b) { out.append(b ? "true" : "false"); }
template <class T>
  requires(std::is_arithmetic_v<T> && !std::same_as<T, char> && !std::same_as<T, bool>)
void append(std::string& out, T n) {
  out.append(std::to_string(n));
}
template <class... Parts>
std::string join(const Parts&... parts) {
  std::string out;
  (append(out, parts), ...);
  return out;
}
}  // namespace detail

/// `log::error("relisting ", kind, ": ", message, " (retrying)")`: the parts are concatenated
/// (strings, numbers, chars) into one line.
template <class... Parts>
void info(const Parts&... parts) {
  write(Severity::kInfo, detail::join(parts...));
}
template <class... Parts>
void warning(const Parts&... parts) {
  write(Severity::kWarning, detail::join(parts...));
}
template <class... Parts>
void error(const Parts&... parts) {
  write(Severity::kError, detail::join(parts...));
}

}  // namespace tessera::log
