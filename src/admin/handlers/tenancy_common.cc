#include "admin/handlers/tenancy_common.h"

#include <memory>

#include <nlohmann/json.hpp>

#include "common/logging.h"

namespace magnetar::admin {

using common::ErrorCode;
using common::Status;

int http_status(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kOk: return 200;
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kAlreadyExists: return 409;
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kLimitReached: return 412;
    case ErrorCode::kWrongNode: return 503;
    case ErrorCode::kPermissionDenied: return 403;
    case ErrorCode::kResourceExhausted: return 429;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kTimeout: return 503;
    case ErrorCode::kUnimplemented: return 501;
    default: return 500;
  }
}

HttpResponse error_response(const Status& status) { return HttpResponse::error(http_status(status), status.message()); }

HttpResponse invalid_name_response(const Status& status) { return HttpResponse::error(412, status.message()); }

HttpResponse empty_or_error(const Status& status) {
  return status.is_ok() ? HttpResponse::no_content() : error_response(status);
}

void run_blocking(broker::Tenancy& tenancy, Responder respond, std::function<HttpResponse()> work) {
  auto responder = std::make_shared<Responder>(std::move(respond));
  Status st = tenancy.submit([responder, work = std::move(work)]() {
    HttpResponse response;
    try {
      response = work();
    } catch (const nlohmann::json::exception& e) {
      response = HttpResponse::error(400, std::string("malformed request: ") + e.what());
    } catch (const std::exception& e) {
      MLOG_ERROR("admin handler failed: {}", e.what());
      response = HttpResponse::error(500, e.what());
    }
    (*responder)(std::move(response));
  });
  if (!st.is_ok()) (*responder)(error_response(st));
}

}  // namespace magnetar::admin
