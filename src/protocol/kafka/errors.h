// Kafka wire error codes, and the one mapping from broker errors to them.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace magnetar::protocol::kafka {

enum ErrorCode : int16_t {
  kUnknownServerError = -1,
  kNone = 0,
  kOffsetOutOfRange = 1,
  kCorruptMessage = 2,
  kUnknownTopicOrPartition = 3,
  kLeaderNotAvailable = 5,
  kNotLeaderOrFollower = 6,  // another broker leads the partition: refresh metadata
  kRequestTimedOut = 7,
  kMessageTooLarge = 10,
  kInvalidTopic = 17,
  kRecordListTooLarge = 18,
  kCoordinatorNotAvailable = 15,
  kNotCoordinator = 16,
  kNotEnoughReplicas = 19,
  kInvalidRequiredAcks = 21,
  kIllegalGeneration = 22,
  kInconsistentGroupProtocol = 23,
  kInvalidGroupId = 24,
  kUnknownMemberId = 25,
  kInvalidSessionTimeout = 26,
  kRebalanceInProgress = 27,
  kInvalidCommitOffsetSize = 28,
  kTopicAuthorizationFailed = 29,
  kGroupAuthorizationFailed = 30,
  kClusterAuthorizationFailed = 31,
  kUnsupportedSaslMechanism = 33,
  kIllegalSaslState = 34,
  kUnsupportedVersion = 35,
  kTopicAlreadyExists = 36,
  kInvalidPartitions = 37,
  kInvalidReplicationFactor = 38,
  kInvalidReplicaAssignment = 39,
  kInvalidConfig = 40,
  kInvalidRequest = 42,
  kUnsupportedForMessageFormat = 43,
  kPolicyViolation = 44,
  kOutOfOrderSequenceNumber = 45,
  kDuplicateSequenceNumber = 46,
  kInvalidProducerEpoch = 47,
  kTransactionalIdAuthorizationFailed = 53,
  kKafkaStorageError = 56,
  kSaslAuthenticationFailed = 58,
  kUnknownProducerId = 59,
  kNonEmptyGroup = 68,
  kGroupIdNotFound = 69,
  kFencedLeaderEpoch = 74,
  kUnknownLeaderEpoch = 75,
  kUnsupportedCompressionType = 76,
  kGroupMaxSizeReached = 81,
  kGroupSubscribedToTopic = 86,
  kInvalidRecord = 87,
  kThrottlingQuotaExceeded = 89,
  kResourceNotFound = 91,
  kDuplicateResource = 92,
  kUnacceptableCredential = 93,
};

// Maps a broker error (a publish, read or topic load that failed) to the
// Kafka error a client acts on.
ErrorCode error_code(const common::Status& st);

}  // namespace magnetar::protocol::kafka
