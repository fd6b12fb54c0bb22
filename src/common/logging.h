// Logging: one format for the whole process, on stderr.
//
//   2026-11-30T08:40:00.123Z INFO  [reactor-0] http listening on 127.0.0.1:8080
//
// Thread names come from runtime (set_thread_name). Log calls are cheap when the
// level is disabled; never log per message on a hot path above debug.
//
// spdlog writes the lines, behind logging.cc: this header holds fmt only, as
// it is included nearly everywhere and spdlog's headers cost a second and
// a half of compile time in every file that sees them.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <iterator>
#include <string_view>

#include "common/status.h"

namespace magnetar::common {

// Sets up the process logger. `level` is one of trace, debug, info, warn,
// error, critical, off. Returns InvalidArgument for anything else.
Status init_logging(std::string_view level);

// Names the calling thread for logs and for the OS (ps, top, gdb).
void set_thread_name(std::string_view name);
std::string_view thread_name();

// Severities, least first.
enum class LogLevel : int { kTrace = 0, kDebug, kInfo, kWarn, kError, kCritical, kOff };

namespace logging_detail {

// The least severity logged; init_logging sets it. Read on every call.
extern std::atomic<int> min_level;
void write(LogLevel level, std::string_view line);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (static_cast<int>(level) < min_level.load(std::memory_order_relaxed)) return;
  fmt::memory_buffer line;
  fmt::vformat_to(std::back_inserter(line), format, fmt::make_format_args(args...));
  write(level, std::string_view(line.data(), line.size()));
}

}  // namespace logging_detail
}  // namespace magnetar::common

// Trace is compiled out, as spdlog's SPDLOG_TRACE is by default.
#define MLOG_TRACE(...) (void)0
#define MLOG_DEBUG(...) ::magnetar::common::logging_detail::log(::magnetar::common::LogLevel::kDebug, __VA_ARGS__)
#define MLOG_INFO(...) ::magnetar::common::logging_detail::log(::magnetar::common::LogLevel::kInfo, __VA_ARGS__)
#define MLOG_WARN(...) ::magnetar::common::logging_detail::log(::magnetar::common::LogLevel::kWarn, __VA_ARGS__)
#define MLOG_ERROR(...) ::magnetar::common::logging_detail::log(::magnetar::common::LogLevel::kError, __VA_ARGS__)
