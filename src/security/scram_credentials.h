// ScramCredentials: the SCRAM users (security/scram.h), per user and
// mechanism a salt, an iteration count, StoredKey and ServerKey, kept in the
// metadata store so they survive a restart and are the same on every member
// of a cluster:
//   /admin/scram-users/{user, percent-encoded}   ScramUser record (scram.fbs)
//
// A SCRAM user name is the role authorization sees, as a token's subject
// is: permissions granted to the role apply to the user.
//
// Reads come from memory, kept current by a metadata watch, so a Kafka
// connection's reactor never waits. Writes are compare-and-set on the
// user's record (retried when another write came first) and update the
// memory once durable, so a read after `done` sees them.
//
// Threads: start() and stop() on main; the rest from any thread. `done`
// callbacks run as the metadata store's do (on the calling reactor, else
// the store's thread).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "metadata/store.h"
#include "runtime/component.h"
#include "security/scram.h"

namespace magnetar::security {

inline constexpr std::string_view kScramUsersRoot = "/admin/scram-users";
std::string scram_user_key(std::string_view user);

// What a user name may be: 1 to 256 bytes, no control characters.
common::Status validate_scram_user(std::string_view user);

struct ScramUser {
  std::string name;
  std::vector<ScramCredential> credentials;  // sorted by mechanism, one each
};

// The record's bytes, and back (Corruption for bytes that are not one).
std::string encode_scram_user(const ScramUser& user);
common::Result<ScramUser> decode_scram_user(std::string_view bytes);

class ScramCredentials final : public runtime::Component {
 public:
  explicit ScramCredentials(metadata::Store& store);
  ~ScramCredentials() override;

  // Watches, then loads every user (blocking).
  std::string_view name() const override { return "scram-credentials"; }
  common::Status start() override;
  void stop() override;

  // The credential of `user` for `mechanism`; nullopt when it has none.
  std::optional<ScramCredential> find(const std::string& user, ScramMechanism mechanism) const;
  // One user; nullopt when it has no credential.
  std::optional<ScramUser> user(const std::string& name) const;
  // Every user, by name.
  std::vector<ScramUser> users() const;

  using Done = std::function<void(common::Status)>;
  // Sets (adds or replaces) `user`'s credential for its mechanism.
  // InvalidArgument for a bad name or iteration count.
  void upsert(std::string user, ScramCredential credential, Done done);
  // Removes `user`'s credential for `mechanism` (the user goes when its
  // last one does); NotFound when it has none.
  void remove(std::string user, ScramMechanism mechanism, Done done);
  // Removes every credential of `user`; NotFound when it has none.
  void remove_user(std::string user, Done done);

 private:
  struct State;
  // Changes a user's record: `change` edits it (nullopt: none yet) and
  // answers what to store (nullopt: delete), or an error that aborts.
  using Change = std::function<common::Result<std::optional<ScramUser>>(std::optional<ScramUser>)>;
  // Static: its callbacks may outlive this object (they hold the state).
  static void modify(metadata::Store& store, std::shared_ptr<State> state, std::string user, Change change,
                     Done done, int attempts_left);

  metadata::Store& store_;
  std::shared_ptr<State> state_;
  std::optional<metadata::WatchId> watch_;
};

}  // namespace magnetar::security
