// `--ephemeral` on the node command (`magnetar start`, `magnetar standalone`):
// a throwaway node for an application's tests. Its data lives in a private
// directory under $TMPDIR (server/ephemeral_dir.h) that it removes when it
// stops; every listener takes a free port unless given one; once ready it
// tells the ports on stdout, as one JSON line or, with --print-env, as shell
// lines after which it carries on in the background.
#pragma once

#include <string>

#include "cli/cli11_fwd.h"
#include "server/config.h"
#include "server/server.h"

namespace magnetar::cli {

struct EphemeralOptions {
  bool enabled = false;    // --ephemeral
  bool print_env = false;  // --print-env: KEY=value lines, then run detached
};

// Adds --ephemeral and --print-env to `cmd`.
void add_ephemeral_flags(CLI::App& cmd, EphemeralOptions& options);

// REQUIRES: `cmd` has been parsed (call it from its callback). Refuses, with
// a CLI::ValidationError that says why, the flags an ephemeral node cannot
// honour (--data-dir, --cluster-port, --join, --cluster-secret-file,
// --fsync, --fsync-interval-ms) and --print-env without --ephemeral. Then
// sets Config::ephemeral (nothing is synced) and gives the settings an
// ephemeral node changes their ephemeral values unless given on the command
// line or in --config: every plaintext listener on port 0, --log-level warn.
void apply_ephemeral_settings(const CLI::App& cmd, const EphemeralOptions& options, server::Config& config);

// What a started ephemeral node prints once ready. One JSON object and a
// newline: {"pid", "dataDir", "readyMs", "ports": <as ports.json>,
// "pulsarUrl", "httpUrl", "kafkaBootstrap", "amqpUrl"}; a URL is left out
// when its listener is off.
std::string ready_json_line(const server::Server& node, double ready_ms);
// The same as KEY=value lines: PULSAR_URL, PULSAR_HTTP_URL, KAFKA_BOOTSTRAP,
// AMQP_URL, MAGNETAR_PID, MAGNETAR_DATA_DIR. A value is single-quoted only
// when it holds a character a shell would split on or expand.
std::string ready_env_lines(const server::Server& node);

}  // namespace magnetar::cli
