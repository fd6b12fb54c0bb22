// Settings from a TOML config file, turned into flags.
#pragma once

#include <string>
#include <vector>

#include "cli/cli11_fwd.h"
#include "common/result.h"

namespace magnetar::cli {

// Reads `path` (TOML: `key = value` lines, optionally under a [<command>]
// table) and returns the settings as flags for `cmd`, e.g. {"--data-dir",
// "/var/lib/magnetar"}. A key that is not a flag of `cmd`, or a file that
// cannot be read, is an InvalidArgument error naming the file and the key.
common::Result<std::vector<std::string>> config_file_flags(const std::string& path, CLI::App& cmd);

// If argv holds `--config FILE` (or `--config=FILE`) after a command name,
// returns argv with the file's settings inserted right after the command name,
// so that flags on the command line override them. Otherwise returns argv.
common::Result<std::vector<std::string>> expand_config_file(int argc, char** argv, CLI::App& app);

}  // namespace magnetar::cli
