#include "protocol/kafka/errors.h"

namespace magnetar::protocol::kafka {

ErrorCode error_code(const common::Status& st) {
  using common::ErrorCode;
  switch (st.code()) {
    case ErrorCode::kOk: return kNone;
    case ErrorCode::kNotFound: return kUnknownTopicOrPartition;
    case ErrorCode::kInvalidArgument: return kInvalidTopic;
    case ErrorCode::kPermissionDenied: return kTopicAuthorizationFailed;
    case ErrorCode::kResourceExhausted: return kThrottlingQuotaExceeded;
    case ErrorCode::kUnavailable: return kLeaderNotAvailable;
    case ErrorCode::kWrongNode: return kNotLeaderOrFollower;
    case ErrorCode::kTimeout: return kRequestTimedOut;
    case ErrorCode::kIoError:
    case ErrorCode::kCorruption: return kKafkaStorageError;
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kLimitReached: return kPolicyViolation;  // the configured policy refuses, not a retriable quota
    default: return kUnknownServerError;
  }
}

}  // namespace magnetar::protocol::kafka
