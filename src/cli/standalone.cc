// `magnetar start`: a node. Without --cluster-port it is a standalone node
// with every role, on embedded defaults; `magnetar standalone` is the same
// command under the name it has always had.
#include <csignal>
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/service_notify.h"
#include "common/logging.h"
#include "server/server.h"

namespace magnetar::cli {
namespace {

int run_standalone(const server::Config& config) {
  auto started_at = std::chrono::steady_clock::now();
  common::Status st = common::init_logging(config.log_level);
  if (!st.is_ok()) {
    fmt::print(stderr, "magnetar: {}\n", st.message());
    return 2;
  }
  // Threads inherit this mask: only the main thread's sigwait sees SIGINT,
  // SIGTERM and SIGHUP, so shutdown and reloads always run here, never
  // inside a reactor.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigset_t waited = stop_signals;
  sigaddset(&waited, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &waited, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  server::Server node(config);
  st = node.start();
  if (!st.is_ok()) {
    MLOG_ERROR("cannot start: {}", st.to_string());
    return 1;
  }
  auto ready_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_at).count();
  for (const auto& line : node.banner()) fmt::print("{}\n", line);
  fmt::print("Ready in {:.1f} ms. Press Ctrl-C to stop.\n", ready_ms);
  std::fflush(stdout);
  // Under systemd (Type=notify) the unit counts as started only now, once
  // every listener is bound.
  if (!notify_service_manager(fmt::format("READY=1\nSTATUS=Ready in {:.1f} ms", ready_ms))) {
    MLOG_WARN("could not send READY=1 to $NOTIFY_SOCKET");
  }

  int sig = 0;
  // SIGHUP reloads the TLS certificates; SIGINT or SIGTERM stops.
  while (sigwait(&waited, &sig) == 0 && sig == SIGHUP) {
    MLOG_INFO("received SIGHUP, reloading TLS certificates");
    node.reload_tls();
  }
  MLOG_INFO("received {}, shutting down (send it again to exit at once)", sig == SIGINT ? "SIGINT" : "SIGTERM");
  notify_service_manager("STOPPING=1");
  // A second signal now takes its default action and ends the process.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  node.stop();
  MLOG_INFO("stopped cleanly");
  return 0;
}

}  // namespace

CLI::App* add_standalone_command(CLI::App& app, server::Config& config, Command& run) {
  auto* start = app.add_subcommand("start", "Run a node: standalone, or a cluster member with --cluster-port");
  add_server_flags(*start, config);
  start->footer(
      "Examples:\n"
      "  magnetar start                                   # standalone, data in ./data\n"
      "  magnetar cluster create-secret --output cluster.key\n"
      "  magnetar start --cluster-port 6660 --cluster-secret-file cluster.key --data-dir d1\n"
      "  magnetar start --cluster-port 6661 --cluster-secret-file cluster.key --data-dir d2 --join host1:6660\n"
      "A node that joined once restarts without --join. A standalone data directory started with\n"
      "--cluster-port becomes the first node of a new cluster, with everything it held.\n");
  start->callback([&run, &config]() { run = [&config]() { return run_standalone(config); }; });

  auto* cmd = app.add_subcommand("standalone", "Run a single node with every role (broker, storage, metadata, admin)");
  add_server_flags(*cmd, config);
  cmd->footer(
      "The same as 'magnetar start'. Examples:\n"
      "  magnetar standalone\n"
      "  magnetar standalone --data-dir /tmp/m1 --http-port 0   # free port, see <data-dir>/ports.json\n"
      "  magnetar standalone --config magnetar.toml\n");
  cmd->callback([&run, &config]() { run = [&config]() { return run_standalone(config); }; });
  return cmd;
}

}  // namespace magnetar::cli
