#include "server/mount_check.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/logging.h"

namespace magnetar::server {

namespace {

// mountinfo writes space, tab, newline and backslash in paths as \ooo.
std::string unescape_mount_path(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool path_is_under(const std::string& path, const std::string& mount_point) {
  if (mount_point == "/") return !path.empty() && path[0] == '/';
  if (path.compare(0, mount_point.size(), mount_point) != 0) return false;
  return path.size() == mount_point.size() || path[mount_point.size()] == '/';
}

}  // namespace

bool has_mount_option(std::string_view options, std::string_view name) {
  size_t start = 0;
  while (start <= options.size()) {
    size_t end = options.find(',', start);
    if (end == std::string_view::npos) end = options.size();
    if (options.substr(start, end - start) == name) return true;
    start = end + 1;
  }
  return false;
}

std::optional<MountInfo> mount_of(std::string_view mountinfo, const std::string& path) {
  std::optional<MountInfo> best;
  std::istringstream lines{std::string(mountinfo)};
  std::string line;
  while (std::getline(lines, line)) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    size_t dash = 0;
    for (size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        dash = i;
        break;
      }
    }
    if (f.size() < 6 || dash == 0 || dash + 3 > f.size()) continue;
    MountInfo m;
    m.mount_point = unescape_mount_path(f[4]);
    m.fs_type = f[dash + 1];
    m.source = f[dash + 2];
    m.options = f[5] + (dash + 3 < f.size() ? "," + f[dash + 3] : std::string());
    if (!path_is_under(path, m.mount_point)) continue;
    if (!best || m.mount_point.size() >= best->mount_point.size()) best = std::move(m);
  }
  return best;
}

void warn_about_data_dir_mount(const std::string& data_dir) {
  std::error_code ec;
  const std::string path = std::filesystem::canonical(data_dir, ec).string();
  if (ec) return;
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  auto m = mount_of(text.str(), path);
  if (!m || !has_mount_option(m->options, "discard")) return;
  MLOG_WARN("data directory {} is on {} ({} on {}) mounted with online discard: every deletion (a storage segment "
            "collected, a topic deleted) makes the device trim the freed blocks, and fdatasync, which every "
            "durable publish waits for, waits behind the trims for seconds after a large one. Mount it without "
            "'discard' and trim periodically instead (systemctl enable --now fstrim.timer)",
            path, m->mount_point, m->fs_type, m->source);
}

}  // namespace magnetar::server
