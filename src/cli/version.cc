// `magnetar version`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "server/server.h"

namespace magnetar::cli {

CLI::App* add_version_command(CLI::App& app, Command& run) {
  auto* cmd = app.add_subcommand("version", "Print the version of this build");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON for scripts");
  cmd->callback([&run, json]() {
    run = [json]() {
      if (*json) {
        fmt::print("{}\n", nlohmann::json{{"version", server::version()}}.dump());
      } else {
        fmt::print("magnetar {}\n", server::version());
      }
      return 0;
    };
  });
  return cmd;
}

}  // namespace magnetar::cli
