#include "security/scram_credentials.h"

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "common/logging.h"
#include "metadata/blocking.h"
#include "security/scram_generated.h"

namespace magnetar::security {

using common::ErrorCode;
using common::Result;
using common::Status;

namespace {

constexpr uint16_t kMaxScramFormat = 1;
constexpr size_t kMaxScramUserBytes = 256;
// Compare-and-set retries before a write gives up (another writer keeps
// winning).
constexpr int kScramWriteAttempts = 8;

bool key_safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '@';
}

std::vector<uint8_t> byte_vector(std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::string byte_string(const flatbuffers::Vector<uint8_t>* v) {
  return v == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(v->data()), v->size());
}

}  // namespace

std::string scram_user_key(std::string_view user) {
  std::string key(kScramUsersRoot);
  key += '/';
  for (char c : user) {
    if (key_safe(c)) {
      key.push_back(c);
    } else {
      key += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return key;
}

Status validate_scram_user(std::string_view user) {
  if (user.empty() || user.size() > kMaxScramUserBytes) {
    return Status::invalid_argument("a SCRAM user name is 1 to 256 bytes");
  }
  for (char c : user) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Status::invalid_argument("a SCRAM user name has no control characters");
    }
  }
  return Status::ok();
}

std::string encode_scram_user(const ScramUser& user) {
  flatbuffers::FlatBufferBuilder out(256);
  std::vector<flatbuffers::Offset<fb::ScramCredential>> items;
  for (const ScramCredential& c : user.credentials) {
    auto salt = out.CreateVector(byte_vector(c.salt));
    auto stored = out.CreateVector(byte_vector(c.stored_key));
    auto server = out.CreateVector(byte_vector(c.server_key));
    items.push_back(
        fb::CreateScramCredential(out, static_cast<int8_t>(c.mechanism), c.iterations, salt, stored, server));
  }
  auto name = out.CreateString(user.name);
  auto vec = out.CreateVector(items);
  out.Finish(fb::CreateScramUser(out, 1, name, vec));
  return std::string(reinterpret_cast<const char*>(out.GetBufferPointer()), out.GetSize());
}

Result<ScramUser> decode_scram_user(std::string_view bytes) {
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!v.VerifyBuffer<fb::ScramUser>(nullptr)) return Status::corruption("SCRAM user record fails verification");
  const fb::ScramUser* r = flatbuffers::GetRoot<fb::ScramUser>(bytes.data());
  if (r->format() > kMaxScramFormat) {
    return Status::corruption(fmt::format("SCRAM user record has format {}, newer than this binary reads",
                                          r->format()));
  }
  ScramUser user;
  user.name = r->name() == nullptr ? std::string() : r->name()->str();
  if (r->credentials() != nullptr) {
    for (const fb::ScramCredential* c : *r->credentials()) {
      auto mechanism = scram_mechanism_from_wire(c->mechanism());
      if (!mechanism) continue;  // a mechanism a later binary added
      ScramCredential credential;
      credential.mechanism = *mechanism;
      credential.iterations = c->iterations();
      credential.salt = byte_string(c->salt());
      credential.stored_key = byte_string(c->stored_key());
      credential.server_key = byte_string(c->server_key());
      user.credentials.push_back(std::move(credential));
    }
  }
  return user;
}

struct ScramCredentials::State {
  struct Entry {
    int64_t version = 0;
    ScramUser user;
  };
  mutable std::shared_mutex mu;
  std::map<std::string, Entry> by_name;  // user name -> record
  std::map<std::string, std::string> name_of_key;  // metadata key -> user name

  // Files `bytes` read at `version` for `key`, unless a newer one is known.
  void put(const std::string& key, std::string_view bytes, int64_t version) {
    auto user = decode_scram_user(bytes);
    if (!user.is_ok()) {
      MLOG_WARN("SCRAM credentials: cannot read {}: {}", key, user.status().to_string());
      return;
    }
    std::unique_lock lock(mu);
    auto it = by_name.find(user->name);
    if (it != by_name.end() && it->second.version > version) return;
    const std::string name = user->name;
    name_of_key[key] = name;
    by_name[name] = Entry{version, std::move(*user)};
  }
  void erase(const std::string& key) {
    std::unique_lock lock(mu);
    auto it = name_of_key.find(key);
    if (it == name_of_key.end()) return;
    by_name.erase(it->second);
    name_of_key.erase(it);
  }
};

ScramCredentials::ScramCredentials(metadata::Store& store) : store_(store), state_(std::make_shared<State>()) {}

ScramCredentials::~ScramCredentials() { stop(); }

Status ScramCredentials::start() {
  auto id = store_.watch(std::string(kScramUsersRoot) + "/",
                         [&store = store_, state = state_](const metadata::Event& e) {
                           // On the metadata thread: reads queue behind earlier
                           // ones, so the last read of a key sees its newest value.
                           std::string key = e.key;
                           store.get(key, [state, key](Result<metadata::Record> r) {
                             if (r.is_ok()) return state->put(key, r->value, r->stat.version);
                             if (r.status().code() == ErrorCode::kNotFound) return state->erase(key);
                             if (r.status().code() != ErrorCode::kUnavailable) {
                               MLOG_WARN("SCRAM credentials: cannot refresh {}: {}", key, r.status().to_string());
                             }
                           });
                         });
  if (!id.is_ok()) return id.status();
  watch_ = *id;
  auto names = metadata::blocking::list_children(store_, std::string(kScramUsersRoot));
  if (!names.is_ok()) return names.status();
  for (const auto& child : *names) {
    std::string key = std::string(kScramUsersRoot) + "/" + child;
    auto r = metadata::blocking::get(store_, key);
    if (r.status().code() == ErrorCode::kNotFound) continue;  // deleted meanwhile
    if (!r.is_ok()) return r.status();
    state_->put(key, r->value, r->stat.version);
  }
  return Status::ok();
}

void ScramCredentials::stop() {
  if (watch_) store_.unwatch(*watch_);
  watch_.reset();
}

std::optional<ScramCredential> ScramCredentials::find(const std::string& user, ScramMechanism mechanism) const {
  std::shared_lock lock(state_->mu);
  auto it = state_->by_name.find(user);
  if (it == state_->by_name.end()) return std::nullopt;
  for (const ScramCredential& c : it->second.user.credentials) {
    if (c.mechanism == mechanism) return c;
  }
  return std::nullopt;
}

std::optional<ScramUser> ScramCredentials::user(const std::string& name) const {
  std::shared_lock lock(state_->mu);
  auto it = state_->by_name.find(name);
  if (it == state_->by_name.end()) return std::nullopt;
  return it->second.user;
}

std::vector<ScramUser> ScramCredentials::users() const {
  std::shared_lock lock(state_->mu);
  std::vector<ScramUser> out;
  out.reserve(state_->by_name.size());
  for (const auto& [name, entry] : state_->by_name) out.push_back(entry.user);
  return out;
}

void ScramCredentials::upsert(std::string user, ScramCredential credential, Done done) {
  if (Status st = validate_scram_user(user); !st.is_ok()) return done(st);
  if (credential.iterations < kScramMinIterations || credential.iterations > kScramMaxIterations) {
    return done(Status::invalid_argument(fmt::format("iterations must be {} to {}", kScramMinIterations,
                                                     kScramMaxIterations)));
  }
  if (credential.salt.empty()) return done(Status::invalid_argument("the salt must not be empty"));
  const std::string name = user;
  modify(store_, state_, std::move(user),
         [name, credential](std::optional<ScramUser> current) -> Result<std::optional<ScramUser>> {
           ScramUser u = current ? std::move(*current) : ScramUser{name, {}};
           auto& cs = u.credentials;
           cs.erase(std::remove_if(cs.begin(), cs.end(),
                                   [&](const ScramCredential& c) { return c.mechanism == credential.mechanism; }),
                    cs.end());
           cs.push_back(credential);
           std::sort(cs.begin(), cs.end(),
                     [](const ScramCredential& a, const ScramCredential& b) { return a.mechanism < b.mechanism; });
           return std::optional<ScramUser>(std::move(u));
         },
         std::move(done), kScramWriteAttempts);
}

void ScramCredentials::remove(std::string user, ScramMechanism mechanism, Done done) {
  const std::string name = user;
  modify(store_, state_, std::move(user),
         [name, mechanism](std::optional<ScramUser> current) -> Result<std::optional<ScramUser>> {
           auto missing = Status::not_found(fmt::format("user '{}' has no {} credential", name,
                                                        scram_mechanism_name(mechanism)));
           if (!current) return missing;
           auto& cs = current->credentials;
           auto it = std::find_if(cs.begin(), cs.end(),
                                  [&](const ScramCredential& c) { return c.mechanism == mechanism; });
           if (it == cs.end()) return missing;
           cs.erase(it);
           if (cs.empty()) return std::optional<ScramUser>();
           return current;
         },
         std::move(done), kScramWriteAttempts);
}

void ScramCredentials::remove_user(std::string user, Done done) {
  const std::string name = user;
  modify(store_, state_, std::move(user),
         [name](std::optional<ScramUser> current) -> Result<std::optional<ScramUser>> {
           if (!current) return Status::not_found(fmt::format("no SCRAM user '{}'", name));
           return std::optional<ScramUser>();
         },
         std::move(done), kScramWriteAttempts);
}

void ScramCredentials::modify(metadata::Store& store, std::shared_ptr<State> state, std::string user, Change change,
                              Done done, int attempts_left) {
  if (Status st = validate_scram_user(user); !st.is_ok()) return done(st);
  std::string key = scram_user_key(user);
  store.get(key, [&store, state, user, key, change, done, attempts_left](Result<metadata::Record> r) mutable {
    if (!r.is_ok() && r.status().code() != ErrorCode::kNotFound) return done(r.status());
    std::optional<ScramUser> current;
    int64_t version = metadata::kMustNotExist;
    if (r.is_ok()) {
      auto decoded = decode_scram_user(r->value);
      if (!decoded.is_ok()) return done(decoded.status());
      current = std::move(*decoded);
      version = r->stat.version;
    }
    auto next = change(std::move(current));
    if (!next.is_ok()) return done(next.status());
    // Another write came first: read again and redo the change.
    auto retry = [&store, state, user, change, done, attempts_left](Status st) mutable {
      const bool raced = st.code() == ErrorCode::kFailedPrecondition || st.code() == ErrorCode::kAlreadyExists ||
                         st.code() == ErrorCode::kNotFound;
      if (raced && attempts_left > 1) {
        return modify(store, state, std::move(user), std::move(change), std::move(done), attempts_left - 1);
      }
      done(st);
    };
    if (!next->has_value()) {
      store.del(key, version, [state, key, done, retry](Status st) mutable {
        if (!st.is_ok()) return retry(st);
        state->erase(key);
        done(Status::ok());
      });
      return;
    }
    std::string bytes = encode_scram_user(**next);
    metadata::PutOptions options;
    options.expected_version = version;
    // The compare-and-set makes the written version the one after `version`.
    store.put(key, bytes, options, [state, key, bytes, version, done, retry](Result<metadata::Stat> st) mutable {
      if (!st.is_ok()) return retry(st.status());
      state->put(key, bytes, version + 1);
      done(Status::ok());
    });
  });
}

}  // namespace magnetar::security
