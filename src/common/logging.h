// Logging: one format for the whole process, on stderr.
//
//   2026-11-30T08:40:00.123Z INFO  [reactor-0] http listening on 127.0.0.1:8080
//
// Thread names come from runtime (set_thread_name). Log calls are cheap when the
// level is disabled; never log per message on a hot path above debug.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "common/status.h"

namespace magnetar::common {

// Sets up the process logger. `level` is one of trace, debug, info, warn,
// error, critical, off. Returns InvalidArgument for anything else.
Status init_logging(std::string_view level);

// Names the calling thread for logs and for the OS (ps, top, gdb).
void set_thread_name(std::string_view name);
std::string_view thread_name();

}  // namespace magnetar::common

#define MLOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define MLOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define MLOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define MLOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define MLOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
