// The one diagnostics path, backed by spdlog: a logger per output (stderr or a given stream), a
// klog-like text pattern or JSON lines, flushed after every line. Lines logged while a test sink is
// installed go to that sink, unformatted.
#include "tessera/api/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <ostream>

#include <nlohmann/json.hpp>
#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace tessera::log {
namespace {

struct State {
  std::mutex mu;
  Sink sink;
  Format format = Format::kText;
  std::ostream* out = nullptr;
  std::shared_ptr<spdlog::logger> logger;  ///< built on first use and after every change
};

State& state() {
  static State s;
  return s;
}
std::atomic<int> gVerbosity{0};

spdlog::level::level_enum levelOf(Severity s) {
  switch (s) {
    case Severity::kWarning: return spdlog::level::warn;
    case Severity::kError: return spdlog::level::err;
    case Severity::kInfo: break;
  }
  return spdlog::level::info;
}

const char* nameOf(Severity s) {
  switch (s) {
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
    case Severity::kInfo: break;
  }
  return "info";
}

/// The logger of the current output and format (state().mu held).
spdlog::logger& logger(State& st) {
  if (!st.logger) {
    spdlog::sink_ptr sink;
    if (st.out) sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*st.out, /*force_flush=*/true);
    else sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    // Text: klog's header (severity letter, mmdd, UTC time with microseconds, thread id). JSON: the
    // line is built in write() (escaping the message), so the pattern is the message alone.
    const char* pattern = st.format == Format::kJson ? "%v" : "%L%m%d %H:%M:%S.%f %t] %v";
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::utc, "\n"));
    st.logger = std::make_shared<spdlog::logger>("tessera", std::move(sink));
    st.logger->set_level(spdlog::level::trace);
    st.logger->flush_on(spdlog::level::trace);  // every line: a crash loses nothing, tests read files
  }
  return *st.logger;
}

std::string jsonLine(Severity severity, std::string_view message) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t secs = system_clock::to_time_t(now);
  const auto micros = duration_cast<microseconds>(now.time_since_epoch()).count() % 1'000'000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[64];  // room for any int the fields could hold (-Wformat-truncation)
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(micros));
  nlohmann::ordered_json j = {{"ts", ts},
                              {"level", nameOf(severity)},
                              {"thread", static_cast<unsigned long long>(spdlog::details::os::thread_id())},
                              {"msg", std::string(message)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Sink setSink(Sink next) {
  State& st = state();
  std::lock_guard guard(st.mu);
  Sink previous = std::move(st.sink);
  st.sink = std::move(next);
  return previous;
}

std::optional<Format> parseFormat(std::string_view text) {
  if (text == "text") return Format::kText;
  if (text == "json") return Format::kJson;
  return std::nullopt;
}

void setFormat(Format format) {
  State& st = state();
  std::lock_guard guard(st.mu);
  st.format = format;
  st.logger.reset();
}

void setOutput(std::ostream* out) {
  State& st = state();
  std::lock_guard guard(st.mu);
  st.out = out;
  st.logger.reset();
}

void setVerbosity(int level) { gVerbosity.store(level, std::memory_order_relaxed); }
int verbosity() { return gVerbosity.load(std::memory_order_relaxed); }

void write(Severity severity, std::string_view message) {
  State& st = state();
  std::lock_guard guard(st.mu);
  if (st.sink) {
    st.sink(severity, message);
    return;
  }
  spdlog::logger& l = logger(st);
  if (st.format == Format::kJson) {
    const std::string line = jsonLine(severity, message);
    l.log(levelOf(severity), spdlog::string_view_t(line.data(), line.size()));
  } else {
    l.log(levelOf(severity), spdlog::string_view_t(message.data(), message.size()));
  }
}

}  // namespace tessera::log
