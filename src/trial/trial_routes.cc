#include "trial/trial_routes.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"

namespace magnetar::trial {

using admin::HttpRequest;
using admin::HttpResponse;
using admin::Responder;
using Json = nlohmann::json;

namespace {

// Only as much of a sign-up body is looked at; the HTTP layer bounds the rest.
constexpr size_t kMaxSignupBody = 4096;

Json trial_terms(const TrialService& trials, const std::function<Json()>& addresses) {
  const TrialOptions& o = trials.options();
  return {{"trial", true},
          {"inviteRequired", !o.invite_codes.empty()},
          {"expirySeconds", o.expiry.count()},
          {"namespace", o.namespace_name},
          {"limits", admin::to_json(o.limits)},
          {"addresses", addresses()}};
}

}  // namespace

void register_trial_routes(admin::AdminService& admin, TrialService& trials, std::function<Json()> addresses) {
  admin::Router& router = admin.router();
  admin.allow_anonymous("/trial/config");
  admin.allow_anonymous("/trial/signup");
  router.get("/trial/config", [&trials, addresses](HttpRequest&, Responder respond) {
    respond(HttpResponse::json(200, trial_terms(trials, addresses)));
  });
  router.post("/trial/signup", [&trials, addresses](HttpRequest& req, Responder respond) {
    SignupRequest request;
    request.address = req.client_address;
    if (!req.body.empty()) {
      if (req.body.size() > kMaxSignupBody) return respond(HttpResponse::error(413, "a sign-up body is small JSON"));
      auto body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded() || !body.is_object()) {
        return respond(HttpResponse::error(400, "the body must be a JSON object, e.g. {\"inviteCode\": \"...\"}"));
      }
      if (body.contains("inviteCode")) {
        if (!body["inviteCode"].is_string()) return respond(HttpResponse::error(400, "inviteCode must be a string"));
        request.invite_code = body["inviteCode"].get<std::string>();
      }
    }
    auto retry_after = std::make_shared<int64_t>(0);
    auto shared = std::make_shared<Responder>(std::move(respond));
    trials.sign_up(std::move(request), retry_after.get(),
                   [shared, retry_after, &trials, addresses](common::Result<Signup> signup) {
                     if (!signup.is_ok()) {
                       HttpResponse r = admin::error_response(signup.status());
                       if (*retry_after > 0) r.headers.emplace_back("Retry-After", std::to_string(*retry_after));
                       return (*shared)(std::move(r));
                     }
                     Json j = signup->record.to_json();
                     j.erase("address");
                     j["token"] = signup->token;
                     j["limits"] = admin::to_json(trials.options().limits);
                     j["addresses"] = addresses();
                     HttpResponse r = HttpResponse::json(201, j);
                     r.headers.emplace_back("Cache-Control", "no-store");
                     (*shared)(std::move(r));
                   });
  });
  router.get("/admin/v2/trials", [&trials](HttpRequest&, Responder respond) {
    auto shared = std::make_shared<Responder>(std::move(respond));
    trials.list([shared](common::Result<std::vector<TrialRecord>> records) {
      if (!records.is_ok()) return (*shared)(admin::error_response(records.status()));
      std::sort(records->begin(), records->end(),
                [](const TrialRecord& a, const TrialRecord& b) { return a.expires_ms < b.expires_ms; });
      Json out = Json::array();
      for (const auto& r : *records) out.push_back(r.to_json());
      (*shared)(HttpResponse::json(200, out));
    });
  });
  router.post("/admin/v2/trials/{tenant}/extend", [&trials](HttpRequest& req, Responder respond) {
    int64_t seconds = -1;
    auto q = req.query.find("seconds");
    if (q != req.query.end()) {
      char* end = nullptr;
      seconds = std::strtoll(q->second.c_str(), &end, 10);
      if (end == q->second.c_str() || *end != '\0') seconds = -1;
    } else if (!req.body.empty()) {
      auto body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (!body.is_discarded() && body.is_object() && body.contains("seconds") && body["seconds"].is_number_integer()) {
        seconds = body["seconds"].get<int64_t>();
      }
    }
    constexpr int64_t kMaxExtension = 365LL * 86400;
    if (seconds <= 0 || seconds > kMaxExtension) {
      return respond(HttpResponse::error(400, "give how much later as {\"seconds\": N} or ?seconds=N, "
                                              "1 to 31536000"));
    }
    auto shared = std::make_shared<Responder>(std::move(respond));
    trials.extend(req.param("tenant"), std::chrono::seconds(seconds), [shared](common::Result<TrialRecord> r) {
      (*shared)(r.is_ok() ? HttpResponse::json(200, r->to_json()) : admin::error_response(r.status()));
    });
  });
  router.del("/admin/v2/trials/{tenant}", [&trials](HttpRequest& req, Responder respond) {
    auto shared = std::make_shared<Responder>(std::move(respond));
    trials.remove(req.param("tenant"), [shared](common::Status st) { (*shared)(admin::empty_or_error(st)); });
  });
}

}  // namespace magnetar::trial
