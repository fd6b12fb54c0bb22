// What the data directory's file system does that costs publishes latency:
// read from /proc/self/mountinfo at start and warned about once.
//
// Online discard (`-o discard`): every deletion (a segment collected, a
// topic deleted) makes the device trim the freed blocks after the next
// journal commit, and fdatasync waits behind the trims: 28-54 ms stalls for
// about 7 s after deleting 2.5 GB on a virtual disk here. A periodic fstrim
// (systemd's fstrim.timer) frees the same blocks off the write path.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace magnetar::server {

struct MountInfo {
  std::string mount_point;
  std::string fs_type;
  std::string source;
  std::string options;  // the mount's own and the file system's, comma separated
};

// The entry of `mountinfo` (the text of /proc/self/mountinfo) whose mount
// point holds `path` (absolute, symlinks resolved); the last mounted wins
// among equals. nullopt when none does or the text is not mountinfo.
std::optional<MountInfo> mount_of(std::string_view mountinfo, const std::string& path);

// Whether the comma-separated `options` hold `name` itself (not a prefix of
// another option).
bool has_mount_option(std::string_view options, std::string_view name);

// Logs at WARN when `data_dir` is on a file system mounted with online
// discard. Quiet when /proc is not there.
void warn_about_data_dir_mount(const std::string& data_dir);

}  // namespace magnetar::server
