#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "server/server.h"

namespace magnetar::cli {

int run(int argc, char** argv) {
  CLI::App app("Magnetar: Pulsar, Kafka and AMQP 0-9-1 over one log, in one binary.", "magnetar");
  app.set_version_flag("--version", std::string(server::version()));
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  magnetar standalone                      # everything on one machine, data in ./data\n"
      "  magnetar standalone --http-port 0        # pick free ports, see ./data/ports.json\n"
      "  magnetar start --cluster-port 6660 --cluster-secret-file cluster.key   # a cluster's first node\n"
      "  magnetar produce my-topic -m hello        # send with the Pulsar protocol\n"
      "  magnetar consume my-topic -s my-sub -n 1  # receive one message\n"
      "  magnetar version\n"
      "\n"
      "Run 'magnetar <command> --help' for a command's flags.");

  server::Config config;
  Command command;
  add_standalone_command(app, config, command);
  add_version_command(app, command);
  add_produce_command(app, command);
  add_consume_command(app, command);
  add_perf_command(app, command);
  add_admin_command(app, command);
  add_trace_command(app, command);
  add_tokens_command(app, command);
  add_cluster_command(app, command);

  auto args = expand_config_file(argc, argv, app);
  if (!args) {
    fmt::print(stderr, "magnetar: {}\n", args.status().message());
    return 2;
  }
  try {
    // CLI11 parses a reversed vector of the arguments after the program name.
    std::vector<std::string> rest(args->rbegin(), args->rend() - 1);
    app.parse(rest);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (argc <= 1) {
      fmt::print(stderr, "{}", app.help());
    } else {
      fmt::print(stderr, "magnetar: {} (see 'magnetar --help')\n", what);
    }
    return 2;
  }
  return command ? command() : 2;
}

}  // namespace magnetar::cli
