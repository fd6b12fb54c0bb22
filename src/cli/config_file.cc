#include "cli/config_file.h"

#include <fstream>

#include <CLI/CLI.hpp>

namespace magnetar::cli {

using common::Result;
using common::Status;

Result<std::vector<std::string>> config_file_flags(const std::string& path, CLI::App& cmd) {
  std::ifstream probe(path);
  if (!probe) return Status::invalid_argument("cannot read config file " + path);
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::Error& e) {
    return Status::invalid_argument("config file " + path + ": " + e.what());
  }
  std::vector<std::string> flags;
  for (const auto& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // table markers
    if (!item.parents.empty() && !(item.parents.size() == 1 && item.parents[0] == cmd.get_name())) {
      return Status::invalid_argument("config file " + path + ": unknown table [" + item.parents[0] +
                                      "] (use top-level keys or [" + cmd.get_name() + "])");
    }
    std::string flag = "--" + item.name;
    if (item.name == "config" || cmd.get_option_no_throw(flag) == nullptr) {
      return Status::invalid_argument("config file " + path + ": unknown setting '" + item.name + "'");
    }
    const bool is_flag = cmd.get_option(flag)->get_expected_max() == 0;
    for (const auto& value : item.inputs) {
      if (is_flag) {
        // A flag takes its value attached: --authentication-enabled=true.
        flags.push_back(flag + "=" + value);
        continue;
      }
      flags.push_back(flag);
      flags.push_back(value);
    }
  }
  return flags;
}

Result<std::vector<std::string>> expand_config_file(int argc, char** argv, CLI::App& app) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() < 2) return args;
  CLI::App* cmd = nullptr;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == args[1]) cmd = sub;
  }
  if (cmd == nullptr) return args;
  std::string path;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) {
      path = args[i + 1];
    } else if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
    }
  }
  if (path.empty()) return args;
  auto flags = config_file_flags(path, *cmd);
  if (!flags) return flags.status();
  args.insert(args.begin() + 2, flags->begin(), flags->end());
  return args;
}

}  // namespace magnetar::cli
