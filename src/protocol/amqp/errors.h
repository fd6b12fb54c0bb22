// AMQP reply codes, and the one mapping from broker errors to them.
//
// Codes 3xx-4xx are channel exceptions (the channel closes, the connection
// stays); 5xx are connection exceptions (the connection closes).
#pragma once

#include <cstdint>

#include "common/status.h"

namespace magnetar::protocol::amqp {

enum ReplyCode : uint16_t {
  kReplySuccess = 200,
  kContentTooLarge = 311,
  kNoRoute = 312,
  kNoConsumers = 313,
  kConnectionForced = 320,
  kInvalidPath = 402,
  kAccessRefused = 403,
  kNotFound = 404,
  kResourceLocked = 405,
  kPreconditionFailed = 406,
  kFrameError = 501,
  kSyntaxError = 502,
  kCommandInvalid = 503,
  kChannelError = 504,
  kUnexpectedFrame = 505,
  kResourceError = 506,
  kNotAllowed = 530,
  kNotImplemented = 540,
  kInternalError = 541,
};

// Whether `code` closes the whole connection rather than one channel.
inline bool is_connection_error(uint16_t code) { return code >= 500; }

// Maps a broker error (a topic load, publish or metadata write that failed)
// to the reply code a client acts on.
ReplyCode reply_code(const common::Status& st);

}  // namespace magnetar::protocol::amqp
