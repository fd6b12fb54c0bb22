// The Kafka APIs this broker serves: per API its key, the versions served,
// the first flexible version and the request and response schemas
// (messages.cc holds the tables, written from the Kafka protocol's message
// definitions).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "protocol/kafka/schema.h"

namespace magnetar::protocol::kafka {

enum ApiKey : int16_t {
  kProduce = 0,
  kFetch = 1,
  kListOffsets = 2,
  kMetadata = 3,
  kOffsetCommit = 8,
  kOffsetFetch = 9,
  kFindCoordinator = 10,
  kJoinGroup = 11,
  kHeartbeat = 12,
  kLeaveGroup = 13,
  kSyncGroup = 14,
  kDescribeGroups = 15,
  kListGroups = 16,
  kSaslHandshake = 17,
  kApiVersions = 18,
  kCreateTopics = 19,
  kDeleteTopics = 20,
  kDeleteRecords = 21,
  kInitProducerId = 22,
  kOffsetForLeaderEpoch = 23,
  kDescribeConfigs = 32,
  kAlterConfigs = 33,
  kDescribeLogDirs = 35,
  kSaslAuthenticate = 36,
  kCreatePartitions = 37,
  kDeleteGroups = 42,
  kIncrementalAlterConfigs = 44,
  kOffsetDelete = 47,
  kDescribeUserScramCredentials = 50,
  kAlterUserScramCredentials = 51,
  kDescribeCluster = 60,
  kDescribeProducers = 61,
};

struct ApiSpec {
  int16_t key;
  std::string_view name;
  int16_t min_version;
  int16_t max_version;
  int16_t flexible_from;  // kNoVersion: no flexible version served
  const Schema* request;
  const Schema* response;

  bool serves(int16_t v) const { return v >= min_version && v <= max_version; }
  bool flexible(int16_t v) const { return v >= flexible_from; }
  // Request header v2 (tagged fields) for flexible versions, else v1.
  int request_header_version(int16_t v) const { return flexible(v) ? 2 : 1; }
  // Response header v1 for flexible versions, except ApiVersions, whose
  // response header stays v0 so a client can read it at any version.
  int response_header_version(int16_t v) const { return flexible(v) && key != kApiVersions ? 1 : 0; }
};

// Every API served, by key order.
std::span<const ApiSpec> served_apis();
// The API with `key`, or null when not served.
const ApiSpec* find_api(int16_t key);

}  // namespace magnetar::protocol::kafka
