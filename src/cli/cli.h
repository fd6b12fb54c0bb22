// The magnetar command line: `magnetar <command> [flags]`.
#pragma once

namespace magnetar::cli {

// Parses argv, runs the chosen command and returns the process exit code:
// 0 on success, 2 for a usage error (unknown flag, bad value), 1 when the
// command itself failed.
int run(int argc, char** argv);

}  // namespace magnetar::cli
