#include "cluster/raft_status.h"

#include <string>

#include "cluster/libraft.h"

namespace magnetar::cluster {

using common::ErrorCode;

namespace {

ErrorCode code_for(int rv) {
  switch (rv) {
    case RAFT_NOTLEADER:
      return ErrorCode::kFailedPrecondition;
    case RAFT_LEADERSHIPLOST:
      return ErrorCode::kFenced;
    case RAFT_SHUTDOWN:
    case RAFT_CANTCHANGE:  // another membership change is still in progress
    case RAFT_BUSY:
    case RAFT_NOCONNECTION:
    case RAFT_CANCELED:
      return ErrorCode::kUnavailable;
    case RAFT_BADID:
    case RAFT_BADROLE:
    case RAFT_MALFORMED:
    case RAFT_INVALID:
    case RAFT_TOOBIG:
    case RAFT_NAMETOOLONG:
      return ErrorCode::kInvalidArgument;
    case RAFT_NOTFOUND:
      return ErrorCode::kNotFound;
    case RAFT_DUPLICATEID:
    case RAFT_DUPLICATEADDRESS:
      return ErrorCode::kAlreadyExists;
    case RAFT_CANTBOOTSTRAP:
      return ErrorCode::kFailedPrecondition;
    case RAFT_IOERR:
      return ErrorCode::kIoError;
    case RAFT_NOSPACE:
    case RAFT_NOMEM:
    case RAFT_TOOMANY:
      return ErrorCode::kResourceExhausted;
    case RAFT_CORRUPT:
      return ErrorCode::kCorruption;
    case RAFT_UNAUTHORIZED:
      return ErrorCode::kPermissionDenied;
    default:
      return ErrorCode::kInternal;
  }
}

}  // namespace

common::Status raft_status(int rv, std::string_view what, std::string_view detail) {
  std::string message(what);
  message += ": ";
  message += raft_strerror(rv);
  if (!detail.empty() && detail != raft_strerror(rv)) {
    message += " (";
    message += detail;
    message += ")";
  }
  return {code_for(rv), std::move(message)};
}

}  // namespace magnetar::cluster
