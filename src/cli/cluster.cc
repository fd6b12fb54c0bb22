// `magnetar cluster ...`: what an operator needs before a node joins a cluster.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cluster/cluster_secret.h"

namespace magnetar::cli {

CLI::App* add_cluster_command(CLI::App& app, Command& run) {
  auto* cmd = app.add_subcommand("cluster", "Set up a cluster: the secret its members share");
  cmd->require_subcommand(1);
  cmd->footer(
      "Examples:\n"
      "  magnetar cluster create-secret --output /etc/magnetar/cluster.key\n"
      "  magnetar start --cluster-port 6660 --cluster-secret-file /etc/magnetar/cluster.key\n"
      "Copy the file to every member (mode 600): a process without it cannot join or talk to members.\n");
  auto output = std::make_shared<std::string>();
  auto* create = cmd->add_subcommand("create-secret", "Write a new random cluster secret to a file only its owner reads");
  create->add_option("-o,--output", *output, "The file to create (refuses to overwrite one)")->required();
  create->callback([&run, output]() {
    run = [output]() {
      common::Status st = cluster::ClusterSecret::create_file(*output);
      if (!st.is_ok()) {
        fmt::print(stderr, "magnetar: {}\n", st.message());
        return 1;
      }
      fmt::print(stderr, "cluster secret written to {}; give every member a copy (mode 600)\n", *output);
      return 0;
    };
  });
  return cmd;
}

}  // namespace magnetar::cli
