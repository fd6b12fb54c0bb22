// Status and Result<T>: errors as values.
//
// A Status is either ok or an error code with a message a user can act on.
// Codes are internal; each protocol maps them to its own wire errors at its
// boundary, in one function. Status is cheap to return when ok (no allocation).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace magnetar::common {

enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument,    // the caller sent something malformed or out of range
  kNotFound,           // the named thing does not exist
  kAlreadyExists,      // creating something that exists
  kFailedPrecondition, // state does not allow the operation (e.g. version mismatch)
  kResourceExhausted,  // a bounded queue or quota is full: back off and retry
  kUnavailable,        // temporarily cannot serve (shutting down, not started)
  kIoError,            // the operating system reported an I/O failure
  kCorruption,         // stored data failed its checksum or framing
  kFenced,             // another writer owns this resource
  kTimeout,            // a bounded wait expired
  kPermissionDenied,   // the principal may not do this
  kUnimplemented,      // the request is valid but not supported
  kInternal,           // an invariant broke: a bug
  kLimitReached,       // a configured count limit refuses one more (producer, consumer,
                       // subscription): retrying helps only once one leaves
  kWrongNode,          // another node of the cluster serves it: look it up again and go there
};

std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(ErrorCode code, std::string message);

  static Status ok() { return Status(); }
  static Status invalid_argument(std::string msg) { return {ErrorCode::kInvalidArgument, std::move(msg)}; }
  static Status not_found(std::string msg) { return {ErrorCode::kNotFound, std::move(msg)}; }
  static Status already_exists(std::string msg) { return {ErrorCode::kAlreadyExists, std::move(msg)}; }
  static Status failed_precondition(std::string msg) { return {ErrorCode::kFailedPrecondition, std::move(msg)}; }
  static Status resource_exhausted(std::string msg) { return {ErrorCode::kResourceExhausted, std::move(msg)}; }
  static Status unavailable(std::string msg) { return {ErrorCode::kUnavailable, std::move(msg)}; }
  static Status io_error(std::string msg) { return {ErrorCode::kIoError, std::move(msg)}; }
  static Status corruption(std::string msg) { return {ErrorCode::kCorruption, std::move(msg)}; }
  static Status fenced(std::string msg) { return {ErrorCode::kFenced, std::move(msg)}; }
  static Status timeout(std::string msg) { return {ErrorCode::kTimeout, std::move(msg)}; }
  static Status permission_denied(std::string msg) { return {ErrorCode::kPermissionDenied, std::move(msg)}; }
  static Status unimplemented(std::string msg) { return {ErrorCode::kUnimplemented, std::move(msg)}; }
  static Status internal(std::string msg) { return {ErrorCode::kInternal, std::move(msg)}; }
  static Status limit_reached(std::string msg) { return {ErrorCode::kLimitReached, std::move(msg)}; }
  static Status wrong_node(std::string msg) { return {ErrorCode::kWrongNode, std::move(msg)}; }
  // An I/O error from errno, e.g. from_errno(errno, "open segment 00000001.log").
  static Status from_errno(int err, std::string_view what);

  bool is_ok() const { return rep_ == nullptr; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return rep_ ? rep_->code : ErrorCode::kOk; }
  // The message without the code; empty when ok.
  const std::string& message() const;
  // "NotFound: tenant 'acme' does not exist", or "OK".
  std::string to_string() const;

  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

 private:
  struct Rep {
    ErrorCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;  // null when ok
};

}  // namespace magnetar::common
