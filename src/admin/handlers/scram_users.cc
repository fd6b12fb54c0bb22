// /admin/v2/scram-users: the SCRAM users Kafka clients authenticate as
// (security/scram_credentials.h). Superusers only (admin_service.cc).
//   GET    /admin/v2/scram-users           every user and its mechanisms
//   GET    /admin/v2/scram-users/{user}    one; 404 without a credential
//   PUT    /admin/v2/scram-users/{user}    {"password": "...", "mechanisms": [...], "iterations": N}
//   DELETE /admin/v2/scram-users/{user}    every credential, or ?mechanism=SCRAM-SHA-256 for one
// The password is salted and hashed here (PBKDF2, on the tenancy thread:
// thousands of HMACs are not a reactor's work) and never stored.
#include <algorithm>
#include <memory>

#include "admin/handlers.h"
#include "admin/handlers/tenancy_common.h"
#include "security/scram_credentials.h"

namespace magnetar::admin {

using Json = nlohmann::json;
using security::ScramMechanism;

namespace {

constexpr size_t kMaxScramPassword = 1024;
constexpr size_t kScramSaltBytes = 32;

Json scram_user_json(const security::ScramUser& user) {
  Json credentials = Json::array();
  for (const auto& c : user.credentials) {
    credentials.push_back({{"mechanism", std::string(security::scram_mechanism_name(c.mechanism))},
                           {"iterations", c.iterations}});
  }
  return {{"user", user.name}, {"credentials", credentials}};
}

struct ScramPut {
  std::string password;
  std::vector<ScramMechanism> mechanisms;
  int32_t iterations = security::kScramDefaultIterations;
};

common::Result<ScramPut> parse_scram_put(const std::string& body) {
  using common::Status;
  auto j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::invalid_argument("the body must be a JSON object: {\"password\": \"...\", \"mechanisms\": "
                                    "[\"SCRAM-SHA-256\", \"SCRAM-SHA-512\"], \"iterations\": 8192}");
  }
  ScramPut put;
  if (!j.contains("password") || !j["password"].is_string() || j["password"].get<std::string>().empty()) {
    return Status::invalid_argument("password must be a non-empty string");
  }
  put.password = j["password"].get<std::string>();
  if (put.password.size() > kMaxScramPassword) return Status::invalid_argument("password is longer than 1024 bytes");
  if (j.contains("iterations")) {
    if (!j["iterations"].is_number_integer()) return Status::invalid_argument("iterations must be an integer");
    const int64_t n = j["iterations"].get<int64_t>();
    if (n < security::kScramMinIterations || n > security::kScramMaxIterations) {
      return Status::invalid_argument("iterations must be 4096 to 16384");
    }
    put.iterations = static_cast<int32_t>(n);
  }
  if (j.contains("mechanisms")) {
    if (!j["mechanisms"].is_array() || j["mechanisms"].empty()) {
      return Status::invalid_argument("mechanisms must be a non-empty list such as [\"SCRAM-SHA-256\"]");
    }
    for (const auto& m : j["mechanisms"]) {
      auto mechanism = m.is_string() ? security::scram_mechanism_from_name(m.get<std::string>()) : std::nullopt;
      if (!mechanism) return Status::invalid_argument("mechanisms are SCRAM-SHA-256 and SCRAM-SHA-512");
      if (std::find(put.mechanisms.begin(), put.mechanisms.end(), *mechanism) == put.mechanisms.end()) {
        put.mechanisms.push_back(*mechanism);
      }
    }
  } else {
    put.mechanisms = {ScramMechanism::kSha256, ScramMechanism::kSha512};
  }
  return put;
}

// Sets `made` from `i` on, one after another (each write reads the record
// the last one left); `done` gets the first error.
void upsert_scram_credentials(security::ScramCredentials& credentials, const std::string& name,
                              std::shared_ptr<std::vector<security::ScramCredential>> made, size_t i,
                              std::function<void(common::Status)> done) {
  if (i == made->size()) return done(common::Status::ok());
  credentials.upsert(name, (*made)[i], [&credentials, name, made, i, done](common::Status st) {
    if (!st.is_ok()) return done(st);
    upsert_scram_credentials(credentials, name, made, i + 1, done);
  });
}

}  // namespace

void register_scram_user_routes(Router& router, broker::Tenancy& tenancy, security::ScramCredentials& credentials) {
  router.get("/admin/v2/scram-users", [&credentials](HttpRequest&, Responder respond) {
    Json out = Json::array();
    for (const auto& user : credentials.users()) out.push_back(scram_user_json(user));
    respond(HttpResponse::json(200, out));
  });
  router.get("/admin/v2/scram-users/{user}", [&credentials](HttpRequest& req, Responder respond) {
    auto user = credentials.user(req.param("user"));
    if (!user) return respond(HttpResponse::error(404, "no SCRAM user '" + req.param("user") + "'"));
    respond(HttpResponse::json(200, scram_user_json(*user)));
  });
  router.put("/admin/v2/scram-users/{user}", [&tenancy, &credentials](HttpRequest& req, Responder respond) {
    const std::string name = req.param("user");
    if (auto st = security::validate_scram_user(name); !st.is_ok()) return respond(error_response(st));
    auto put = parse_scram_put(req.body);
    if (!put.is_ok()) return respond(error_response(put.status()));
    auto shared = std::make_shared<Responder>(std::move(respond));
    common::Status queued = tenancy.submit([&credentials, name, put = std::move(*put), shared]() {
      auto made = std::make_shared<std::vector<security::ScramCredential>>();
      for (ScramMechanism m : put.mechanisms) {
        made->push_back(
            security::scram_credential(m, put.password, security::scram_random_bytes(kScramSaltBytes), put.iterations));
      }
      upsert_scram_credentials(credentials, name, made, 0, [shared](common::Status st) {
        (*shared)(empty_or_error(st));
      });
    });
    if (!queued.is_ok()) (*shared)(error_response(queued));
  });
  router.del("/admin/v2/scram-users/{user}", [&credentials](HttpRequest& req, Responder respond) {
    auto shared = std::make_shared<Responder>(std::move(respond));
    auto done = [shared](common::Status st) { (*shared)(empty_or_error(st)); };
    auto q = req.query.find("mechanism");
    if (q == req.query.end()) return credentials.remove_user(req.param("user"), done);
    auto mechanism = security::scram_mechanism_from_name(q->second);
    if (!mechanism) return (*shared)(HttpResponse::error(400, "mechanism is SCRAM-SHA-256 or SCRAM-SHA-512"));
    credentials.remove(req.param("user"), *mechanism, done);
  });
}

}  // namespace magnetar::admin
