#include "common/status.h"

#include <cstring>

namespace magnetar::common {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "OK";
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kAlreadyExists: return "AlreadyExists";
    case ErrorCode::kFailedPrecondition: return "FailedPrecondition";
    case ErrorCode::kResourceExhausted: return "ResourceExhausted";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kIoError: return "IoError";
    case ErrorCode::kCorruption: return "Corruption";
    case ErrorCode::kFenced: return "Fenced";
    case ErrorCode::kTimeout: return "Timeout";
    case ErrorCode::kPermissionDenied: return "PermissionDenied";
    case ErrorCode::kUnimplemented: return "Unimplemented";
    case ErrorCode::kInternal: return "Internal";
    case ErrorCode::kLimitReached: return "LimitReached";
    case ErrorCode::kWrongNode: return "WrongNode";
  }
  return "Unknown";
}

Status::Status(ErrorCode code, std::string message) {
  if (code != ErrorCode::kOk) rep_ = std::make_unique<Rep>(Rep{code, std::move(message)});
}

Status Status::from_errno(int err, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return Status(ErrorCode::kIoError, std::move(msg));
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::to_string() const {
  if (!rep_) return "OK";
  std::string out(error_code_name(rep_->code));
  out += ": ";
  out += rep_->message;
  return out;
}

}  // namespace magnetar::common
