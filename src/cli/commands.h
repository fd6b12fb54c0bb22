// One function per command; each registers its subcommand and flags on the
// app and returns what runs it once parsing succeeded.
#pragma once

#include <functional>

#include "cli/cli11_fwd.h"
#include "server/config.h"

namespace magnetar::cli {

using Command = std::function<int()>;

// Adds the node settings (data dir, ports, addresses, ...) to `cmd` as flags
// that also read from --config.
void add_server_flags(CLI::App& cmd, server::Config& config);

CLI::App* add_standalone_command(CLI::App& app, server::Config& config, Command& run);
CLI::App* add_version_command(CLI::App& app, Command& run);
// `magnetar produce` / `magnetar consume` (produce_consume.cc).
CLI::App* add_produce_command(CLI::App& app, Command& run);
CLI::App* add_consume_command(CLI::App& app, Command& run);
// `magnetar perf` (perf.cc).
CLI::App* add_perf_command(CLI::App& app, Command& run);
// `magnetar perf disk` (perf_disk.cc), under `perf`.
void add_perf_disk_command(CLI::App* perf, Command& run);
// `magnetar trace` (trace.cc).
CLI::App* add_trace_command(CLI::App& app, Command& run);
// `magnetar admin ...` (admin_cli.h).
CLI::App* add_admin_command(CLI::App& app, Command& run);
// `magnetar tokens ...` (tokens.cc).
CLI::App* add_tokens_command(CLI::App& app, Command& run);
// `magnetar cluster ...` (cluster.cc).
CLI::App* add_cluster_command(CLI::App& app, Command& run);

}  // namespace magnetar::cli
