// `magnetar start`: a node. Without --cluster-port it is a standalone node
// with every role, on embedded defaults; `magnetar standalone` is the same
// command under the name it has always had.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/ephemeral.h"
#include "cli/service_notify.h"
#include "common/logging.h"
#include "server/ephemeral_dir.h"
#include "server/server.h"

namespace magnetar::cli {
namespace {

// Points stderr at <dir>/node.log: a detached node must not hold its
// caller's stderr open (a shell or CI step reading it would wait for the
// node to exit). False when the file cannot be opened; stderr stays.
bool log_into(const std::string& dir) {
  std::string path = dir + "/node.log";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  std::fflush(stderr);
  const bool ok = ::dup2(fd, STDERR_FILENO) >= 0;
  ::close(fd);
  return ok;
}

// Writes all of `text` to `fd`; false when the reader went away.
bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Runs a node until SIGINT or SIGTERM. An ephemeral node first removes the
// directories dead ephemeral nodes left and makes its own, which it removes
// once stopped. Once ready, a node prints its banner; an ephemeral one its
// JSON line instead, or, when `ready_fd` >= 0 (detached by --print-env), writes
// its env lines there, closes it and logs into its directory from then on.
int run_node(server::Config config, const EphemeralOptions& ephemeral, int ready_fd) {
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

  std::unique_ptr<server::EphemeralDir> ephemeral_dir;  // outlives the node below
  if (ephemeral.enabled) {
    const std::string root = server::EphemeralDir::temp_root();
    for (const auto& path : server::EphemeralDir::remove_stale(root)) {
      MLOG_INFO("removed {}, left by an ephemeral node that is gone", path);
    }
    auto dir = server::EphemeralDir::create(root);
    if (!dir.is_ok()) {
      MLOG_ERROR("cannot start: {}", dir.status().to_string());
      return 1;
    }
    ephemeral_dir = std::move(*dir);
    config.data_dir = ephemeral_dir->path();
  }

  server::Server node(config);
  st = node.start();
  if (!st.is_ok()) {
    MLOG_ERROR("cannot start: {}", st.to_string());
    return 1;
  }
  auto ready_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_at).count();
  if (ready_fd >= 0) {
    if (!log_into(ephemeral_dir->path())) MLOG_WARN("cannot log into {}/node.log", ephemeral_dir->path());
    (void)write_all(ready_fd, ready_env_lines(node));  // a caller that went away has no use for them
    ::close(ready_fd);
  } else if (ephemeral.enabled) {
    fmt::print("{}", ready_json_line(node, ready_ms));
  } else {
    for (const auto& line : node.banner()) fmt::print("{}\n", line);
    fmt::print("Ready in {:.1f} ms. Press Ctrl-C to stop.\n", ready_ms);
  }
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
  if (ephemeral_dir) {
    st = ephemeral_dir->remove();
    if (!st.is_ok()) MLOG_WARN("{}", st.message());
  }
  MLOG_INFO("stopped cleanly");
  return 0;
}

// --ephemeral --print-env: the node runs in a child of its own session, with
// stdin and stdout on /dev/null; this process prints the env lines the child
// sends once it is ready and exits 0, or, when the child ends without
// sending them (it could not start; it said why on stderr), exits with its
// code. Forks before any thread exists.
int run_detached(const server::Config& config, const EphemeralOptions& ephemeral) {
  int ready_pipe[2];
  if (::pipe2(ready_pipe, O_CLOEXEC) != 0) {
    fmt::print(stderr, "magnetar: cannot make a pipe: {}\n", std::strerror(errno));
    return 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t child = ::fork();
  if (child < 0) {
    fmt::print(stderr, "magnetar: cannot fork: {}\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    ::close(ready_pipe[0]);
    ::setsid();
    int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(null_fd, STDOUT_FILENO);
      ::close(null_fd);
    }
    return run_node(config, ephemeral, ready_pipe[1]);
  }
  ::close(ready_pipe[1]);
  std::string env;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(ready_pipe[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    env.append(buf, static_cast<size_t>(n));
  }
  ::close(ready_pipe[0]);
  if (!env.empty()) {
    fmt::print("{}", env);
    return 0;
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int run_node_command(const server::Config& config, const EphemeralOptions& ephemeral) {
  if (ephemeral.print_env) return run_detached(config, ephemeral);
  return run_node(config, ephemeral, /*ready_fd=*/-1);
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
      "  magnetar start --ephemeral                       # for tests: free ports, one JSON line, no trace left\n"
      "  eval \"$(magnetar start --ephemeral --print-env)\"  # PULSAR_URL=... in the shell; kill $MAGNETAR_PID\n"
      "A node that joined once restarts without --join. A standalone data directory started with\n"
      "--cluster-port becomes the first node of a new cluster, with everything it held.\n");
  auto ephemeral = std::make_shared<EphemeralOptions>();
  add_ephemeral_flags(*start, *ephemeral);
  start->callback([&run, &config, start, ephemeral]() {
    apply_ephemeral_settings(*start, *ephemeral, config);
    run = [&config, ephemeral]() { return run_node_command(config, *ephemeral); };
  });

  auto* cmd = app.add_subcommand("standalone", "Run a single node with every role (broker, storage, metadata, admin)");
  add_server_flags(*cmd, config);
  cmd->footer(
      "The same as 'magnetar start'. Examples:\n"
      "  magnetar standalone\n"
      "  magnetar standalone --data-dir /tmp/m1 --http-port 0   # free port, see <data-dir>/ports.json\n"
      "  magnetar standalone --config magnetar.toml\n"
      "  magnetar standalone --ephemeral                  # for tests: free ports, one JSON line, no trace left\n");
  add_ephemeral_flags(*cmd, *ephemeral);
  cmd->callback([&run, &config, cmd, ephemeral]() {
    apply_ephemeral_settings(*cmd, *ephemeral, config);
    run = [&config, ephemeral]() { return run_node_command(config, *ephemeral); };
  });
  return cmd;
}

}  // namespace magnetar::cli
