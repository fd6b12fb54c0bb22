#include "protocol/amqp/errors.h"

namespace magnetar::protocol::amqp {

ReplyCode reply_code(const common::Status& st) {
  using common::ErrorCode;
  switch (st.code()) {
    case ErrorCode::kOk: return kReplySuccess;
    case ErrorCode::kNotFound: return kNotFound;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kAlreadyExists: return kPreconditionFailed;
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kLimitReached: return kAccessRefused;  // as RabbitMQ refuses a queue in exclusive use
    // Another cluster member serves the queue: a channel exception, so the
    // connection goes on publishing (which works through any member).
    case ErrorCode::kWrongNode: return kResourceLocked;
    case ErrorCode::kFenced: return kResourceLocked;
    case ErrorCode::kResourceExhausted: return kResourceError;
    case ErrorCode::kUnimplemented: return kNotImplemented;
    default: return kInternalError;
  }
}

}  // namespace magnetar::protocol::amqp
