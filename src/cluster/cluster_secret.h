// ClusterSecret: the key every member of a cluster shares, and nothing else.
// A process that holds it may join the cluster and speak on the cluster port;
// one that does not is refused by every member (link.h).
//
// On disk the secret is one line of hex text (at least 32 bytes once decoded),
// in a file only its owner may read: create_file writes one on the first node,
// and the operator copies the file to every other node.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "common/result.h"
#include "common/status.h"

namespace magnetar::cluster {

class ClusterSecret {
 public:
  // The least number of secret bytes load() accepts.
  static constexpr size_t kMinBytes = 32;

  // Reads a secret file made by create_file: hex text of >= 32 bytes (whitespace trimmed). InvalidArgument with a
  // clear message when the file is missing, unreadable, too short, not hex, or readable by group/others
  // (mode & 077: the message says "chmod 600").
  static common::Result<ClusterSecret> load(const std::string& path);
  // Writes 32 random bytes (RAND_bytes) as hex + "\n" to a new file with mode 0600; AlreadyExists if it exists.
  static common::Status create_file(const std::string& path);
  // For tests.
  static ClusterSecret from_bytes(std::string bytes);

  // HMAC-SHA256 of `data` under the secret (32 raw bytes).
  std::string mac(std::string_view data) const;

 private:
  explicit ClusterSecret(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace magnetar::cluster
