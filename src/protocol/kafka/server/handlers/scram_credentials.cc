// DescribeUserScramCredentials and AlterUserScramCredentials: the SCRAM
// users (security/scram_credentials.h), for superusers only (Kafka asks for
// Describe / Alter on the cluster; roles here have no cluster grants).
//
// Describe: Users null or empty lists every user; a named user without a
// credential is RESOURCE_NOT_FOUND, one named twice DUPLICATE_RESOURCE.
// Alter: one result per user named. A user's deletions and upsertions apply
// only when all of them are valid: an unknown mechanism is
// UNSUPPORTED_SASL_MECHANISM; an empty name, iterations outside 4096-16384,
// an empty salt or a salted password of the wrong length
// UNACCEPTABLE_CREDENTIAL; a mechanism named twice for one user
// DUPLICATE_RESOURCE; deleting a credential that does not exist
// RESOURCE_NOT_FOUND. The request carries salted passwords (the client
// salts and hashes), from which the StoredKey and ServerKey are made.
#include <fmt/format.h>

#include <map>
#include <set>

#include "common/join.h"
#include "common/logging.h"
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

using security::ScramMechanism;

namespace {

struct ScramOp {
  bool upsert = false;
  ScramMechanism mechanism = ScramMechanism::kSha256;
  security::ScramCredential credential;  // upsert only
};

struct UserOps {
  ErrorCode error = kNone;
  std::string message;
  std::vector<ScramOp> ops;
};

ErrorCode scram_store_error(const common::Status& st) {
  switch (st.code()) {
    case common::ErrorCode::kNotFound: return kResourceNotFound;
    case common::ErrorCode::kInvalidArgument: return kUnacceptableCredential;
    case common::ErrorCode::kPermissionDenied: return kClusterAuthorizationFailed;
    default: return kRequestTimedOut;
  }
}

// Checks one deletion or upsertion of `request` and files it under its user.
void file_scram_op(std::map<std::string, UserOps>& users, const Struct& item, bool upsert) {
  const std::string name = item.str("Name");
  UserOps& u = users[name];
  if (u.error != kNone) return;
  auto fail = [&u](ErrorCode e, std::string why) {
    u.error = e;
    u.message = std::move(why);
  };
  auto mechanism = security::scram_mechanism_from_wire(item.i("Mechanism"));
  if (!mechanism) {
    return fail(kUnsupportedSaslMechanism, fmt::format("unknown SCRAM mechanism {}", item.i("Mechanism")));
  }
  if (name.empty()) return fail(kUnacceptableCredential, "the user name is empty");
  if (auto st = security::validate_scram_user(name); !st.is_ok()) return fail(kUnacceptableCredential, st.message());
  for (const ScramOp& other : u.ops) {
    if (other.mechanism == *mechanism) {
      return fail(kDuplicateResource, fmt::format("{} is named twice for this user",
                                                  security::scram_mechanism_name(*mechanism)));
    }
  }
  ScramOp op;
  op.upsert = upsert;
  op.mechanism = *mechanism;
  if (upsert) {
    const int64_t iterations = item.i("Iterations");
    if (iterations < security::kScramMinIterations || iterations > security::kScramMaxIterations) {
      return fail(kUnacceptableCredential, fmt::format("iterations must be {} to {}", security::kScramMinIterations,
                                                       security::kScramMaxIterations));
    }
    const common::Slice* salt = item.bytes("Salt");
    const common::Slice* salted = item.bytes("SaltedPassword");
    if (salt == nullptr || salt->size() == 0) return fail(kUnacceptableCredential, "the salt is empty");
    const size_t hash_size = *mechanism == ScramMechanism::kSha512 ? 64 : 32;
    if (salted == nullptr || salted->size() != hash_size) {
      return fail(kUnacceptableCredential, fmt::format("a {} salted password is {} bytes",
                                                       security::scram_mechanism_name(*mechanism), hash_size));
    }
    op.credential = security::scram_credential_from_salted(*mechanism, salted->view(), std::string(salt->view()),
                                                           static_cast<int32_t>(iterations));
  }
  u.ops.push_back(std::move(op));
}

// Applies `ops` from `i` on, one after another, each on the record the last
// left; `done` gets the first error.
void apply_scram_ops(security::ScramCredentials* store, const std::string& name,
                     std::shared_ptr<std::vector<ScramOp>> ops, size_t i, std::function<void(common::Status)> done) {
  if (i == ops->size()) return done(common::Status::ok());
  auto next = [store, name, ops, i, done](common::Status st) {
    if (!st.is_ok()) return done(st);
    apply_scram_ops(store, name, ops, i + 1, done);
  };
  const ScramOp& op = (*ops)[i];
  if (op.upsert) {
    store->upsert(name, op.credential, std::move(next));
  } else {
    store->remove(name, op.mechanism, std::move(next));
  }
}

}  // namespace

void handle_describe_user_scram_credentials(KafkaConnection& c, const Request& request) {
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  if (auto st = c.service().authorization().check_superuser(c.role()); !st.is_ok()) {
    resp.set("ErrorCode", int64_t{kClusterAuthorizationFailed});
    resp.set("ErrorMessage", st.message());
    return c.respond(request, resp);
  }
  resp.set("ErrorCode", int64_t{kNone});
  security::ScramCredentials* store = c.service().scram_credentials();
  auto describe = [&resp](const security::ScramUser& user) {
    Struct& r = resp.add("Results");
    r.set("User", user.name);
    r.set("ErrorCode", int64_t{kNone});
    for (const auto& cred : user.credentials) {
      Struct& info = r.add("CredentialInfos");
      info.set("Mechanism", int64_t{static_cast<int8_t>(cred.mechanism)});
      info.set("Iterations", int64_t{cred.iterations});
    }
  };
  const bool all = request.body.is_null("Users") || request.body.array("Users").empty();
  if (all) {
    if (store != nullptr) {
      for (const auto& user : store->users()) describe(user);
    }
    return c.respond(request, resp);
  }
  std::map<std::string, int> named;
  for (const Struct& u : request.body.array("Users")) named[u.str("Name")]++;
  for (const auto& [name, times] : named) {
    auto user = store != nullptr ? store->user(name) : std::nullopt;
    if (times == 1 && user) {
      describe(*user);
      continue;
    }
    Struct& r = resp.add("Results");
    r.set("User", name);
    r.set("ErrorCode", int64_t{times > 1 ? kDuplicateResource : kResourceNotFound});
    r.set("ErrorMessage", times > 1 ? std::string("the user is named more than once")
                                    : "no SCRAM credential for user '" + name + "'");
  }
  c.respond(request, resp);
}

void handle_alter_user_scram_credentials(KafkaConnection& c, const Request& request) {
  std::map<std::string, UserOps> users;
  for (const Struct& d : request.body.array("Deletions")) file_scram_op(users, d, false);
  for (const Struct& u : request.body.array("Upsertions")) file_scram_op(users, u, true);
  security::ScramCredentials* store = c.service().scram_credentials();
  common::Status allowed = c.service().authorization().check_superuser(c.role());
  if (allowed.is_ok() && store == nullptr) allowed = common::Status::unavailable("this node keeps no SCRAM users");
  // One answer per user, filled in as its writes finish (on this reactor).
  auto results = std::make_shared<std::map<std::string, std::pair<ErrorCode, std::string>>>();
  auto join = common::Join::start([reply = c.replier(), request, results](common::Status) {
    reply([request, results](KafkaConnection& conn) {
      Struct resp = request.response();
      resp.set("ThrottleTimeMs", int64_t{0});
      for (const auto& [name, result] : *results) {
        Struct& r = resp.add("Results");
        r.set("User", name);
        r.set("ErrorCode", int64_t{result.first});
        if (result.first != kNone) r.set("ErrorMessage", result.second);
      }
      conn.respond(request, resp);
    });
  });
  for (auto& [name, u] : users) {
    if (!allowed.is_ok()) {
      (*results)[name] = {allowed.code() == common::ErrorCode::kUnavailable ? kResourceNotFound
                                                                             : kClusterAuthorizationFailed,
                          allowed.message()};
      continue;
    }
    if (u.error != kNone) {
      (*results)[name] = {u.error, u.message};
      continue;
    }
    (*results)[name] = {kNone, {}};
    MLOG_INFO("kafka client {}: role '{}' alters the SCRAM credentials of '{}'", c.peer_host(), c.role(), name);
    auto ops = std::make_shared<std::vector<ScramOp>>(std::move(u.ops));
    apply_scram_ops(store, name, ops, 0, [name, results, done = join->branch()](common::Status st) {
      if (!st.is_ok()) (*results)[name] = {scram_store_error(st), st.message()};
      done(common::Status::ok());
    });
  }
  join->release();
}

}  // namespace magnetar::protocol::kafka
