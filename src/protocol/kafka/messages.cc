// Field tables per API. Each Field: name, type, first version, last version
// (kNoVersion = still present), first nullable version.
#include "protocol/kafka/messages.h"

#include <array>
#include <climits>

namespace magnetar::protocol::kafka {

namespace {

using T = FieldType;
constexpr int16_t N = kNoVersion;

// --- ApiVersions (18)
const Schema kApiVersionsRequest{{
    {"ClientSoftwareName", T::kString, 3},
    {"ClientSoftwareVersion", T::kString, 3},
}};
const Schema kApiVersionsKey{{
    {"ApiKey", T::kInt16},
    {"MinVersion", T::kInt16},
    {"MaxVersion", T::kInt16},
}};
const Schema kApiVersionsResponse{{
    {"ErrorCode", T::kInt16},
    {"ApiKeys", T::kStructArray, 0, N, N, &kApiVersionsKey},
    {"ThrottleTimeMs", T::kInt32, 1},
}};

// --- Metadata (3)
const Schema kMetadataRequestTopic{{
    {"TopicId", T::kUuid, 10},
    {"Name", T::kString, 0, N, 10},
}};
const Schema kMetadataRequest{{
    {"Topics", T::kStructArray, 0, N, 1, &kMetadataRequestTopic},
    {"AllowAutoTopicCreation", T::kBool, 4, N, N, nullptr, 1},
    {"IncludeClusterAuthorizedOperations", T::kBool, 8, 10},
    {"IncludeTopicAuthorizedOperations", T::kBool, 8},
}};
const Schema kMetadataBroker{{
    {"NodeId", T::kInt32},
    {"Host", T::kString},
    {"Port", T::kInt32},
    {"Rack", T::kString, 1, N, 1},
}};
const Schema kMetadataPartition{{
    {"ErrorCode", T::kInt16},
    {"PartitionIndex", T::kInt32},
    {"LeaderId", T::kInt32},
    {"LeaderEpoch", T::kInt32, 7, N, N, nullptr, -1},
    {"ReplicaNodes", T::kInt32Array},
    {"IsrNodes", T::kInt32Array},
    {"OfflineReplicas", T::kInt32Array, 5},
}};
const Schema kMetadataTopic{{
    {"ErrorCode", T::kInt16},
    {"Name", T::kString},
    {"IsInternal", T::kBool, 1},
    {"Partitions", T::kStructArray, 0, N, N, &kMetadataPartition},
    {"TopicAuthorizedOperations", T::kInt32, 8, N, N, nullptr, INT32_MIN},
}};
const Schema kMetadataResponse{{
    {"ThrottleTimeMs", T::kInt32, 3},
    {"Brokers", T::kStructArray, 0, N, N, &kMetadataBroker},
    {"ClusterId", T::kString, 2, N, 2},
    {"ControllerId", T::kInt32, 1, N, N, nullptr, -1},
    {"Topics", T::kStructArray, 0, N, N, &kMetadataTopic},
    {"ClusterAuthorizedOperations", T::kInt32, 8, 10, N, nullptr, INT32_MIN},
}};

// --- Produce (0)
const Schema kProducePartitionData{{
    {"PartitionIndex", T::kInt32},
    {"Records", T::kBytes, 0, N, 0},
}};
const Schema kProduceTopicData{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kProducePartitionData},
}};
const Schema kProduceRequest{{
    {"TransactionalId", T::kString, 3, N, 0},
    {"Acks", T::kInt16},
    {"TimeoutMs", T::kInt32},
    {"Topics", T::kStructArray, 0, N, N, &kProduceTopicData},
}};
const Schema kProduceRecordError{{
    {"BatchIndex", T::kInt32},
    {"BatchIndexErrorMessage", T::kString, 0, N, 0},
}};
const Schema kProducePartitionResponse{{
    {"PartitionIndex", T::kInt32},
    {"ErrorCode", T::kInt16},
    {"BaseOffset", T::kInt64},
    {"LogAppendTimeMs", T::kInt64, 2, N, N, nullptr, -1},
    {"LogStartOffset", T::kInt64, 5, N, N, nullptr, -1},
    {"RecordErrors", T::kStructArray, 8, N, N, &kProduceRecordError},
    {"ErrorMessage", T::kString, 8, N, 8},
}};
const Schema kProduceTopicResponse{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kProducePartitionResponse},
}};
const Schema kProduceResponse{{
    {"Responses", T::kStructArray, 0, N, N, &kProduceTopicResponse},
    {"ThrottleTimeMs", T::kInt32, 1},
}};

// --- Fetch (1)
const Schema kFetchPartition{{
    {"PartitionIndex", T::kInt32},
    {"CurrentLeaderEpoch", T::kInt32, 9, N, N, nullptr, -1},
    {"FetchOffset", T::kInt64},
    {"LastFetchedEpoch", T::kInt32, 12, N, N, nullptr, -1},
    {"LogStartOffset", T::kInt64, 5, N, N, nullptr, -1},
    {"PartitionMaxBytes", T::kInt32},
}};
const Schema kFetchTopic{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kFetchPartition},
}};
const Schema kForgottenTopic{{
    {"Name", T::kString},
    {"PartitionIndexes", T::kInt32Array},
}};
const Schema kFetchRequest{{
    {"ReplicaId", T::kInt32},
    {"MaxWaitMs", T::kInt32},
    {"MinBytes", T::kInt32},
    {"MaxBytes", T::kInt32, 3, N, N, nullptr, INT32_MAX},
    {"IsolationLevel", T::kInt8, 4},
    {"SessionId", T::kInt32, 7},
    {"SessionEpoch", T::kInt32, 7, N, N, nullptr, -1},
    {"Topics", T::kStructArray, 0, N, N, &kFetchTopic},
    {"Forgotten", T::kStructArray, 7, N, N, &kForgottenTopic},
    {"RackId", T::kString, 11},
}};
const Schema kAbortedTransaction{{
    {"ProducerId", T::kInt64},
    {"FirstOffset", T::kInt64},
}};
const Schema kFetchPartitionResponse{{
    {"PartitionIndex", T::kInt32},
    {"ErrorCode", T::kInt16},
    {"HighWatermark", T::kInt64},
    {"LastStableOffset", T::kInt64, 4, N, N, nullptr, -1},
    {"LogStartOffset", T::kInt64, 5, N, N, nullptr, -1},
    {"AbortedTransactions", T::kStructArray, 4, N, 4, &kAbortedTransaction},
    {"PreferredReadReplica", T::kInt32, 11, N, N, nullptr, -1},
    {"Records", T::kBytes, 0, N, 0},
}};
const Schema kFetchTopicResponse{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kFetchPartitionResponse},
}};
const Schema kFetchResponse{{
    {"ThrottleTimeMs", T::kInt32, 1},
    {"ErrorCode", T::kInt16, 7},
    {"SessionId", T::kInt32, 7},
    {"Responses", T::kStructArray, 0, N, N, &kFetchTopicResponse},
}};

// --- ListOffsets (2)
const Schema kListOffsetsPartition{{
    {"PartitionIndex", T::kInt32},
    {"CurrentLeaderEpoch", T::kInt32, 4, N, N, nullptr, -1},
    {"Timestamp", T::kInt64},
    {"MaxNumOffsets", T::kInt32, 0, 0, N, nullptr, 1},
}};
const Schema kListOffsetsTopic{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kListOffsetsPartition},
}};
const Schema kListOffsetsRequest{{
    {"ReplicaId", T::kInt32},
    {"IsolationLevel", T::kInt8, 2},
    {"Topics", T::kStructArray, 0, N, N, &kListOffsetsTopic},
}};
const Schema kListOffsetsPartitionResponse{{
    {"PartitionIndex", T::kInt32},
    {"ErrorCode", T::kInt16},
    {"OldStyleOffsets", T::kInt64Array, 0, 0},
    {"Timestamp", T::kInt64, 1, N, N, nullptr, -1},
    {"Offset", T::kInt64, 1, N, N, nullptr, -1},
    {"LeaderEpoch", T::kInt32, 4, N, N, nullptr, -1},
}};
const Schema kListOffsetsTopicResponse{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kListOffsetsPartitionResponse},
}};
const Schema kListOffsetsResponse{{
    {"ThrottleTimeMs", T::kInt32, 2},
    {"Topics", T::kStructArray, 0, N, N, &kListOffsetsTopicResponse},
}};

// --- FindCoordinator (10). v4 batches keys; not served.
const Schema kFindCoordinatorRequest{{
    {"Key", T::kString},
    {"KeyType", T::kInt8, 1},
}};
const Schema kFindCoordinatorResponse{{
    {"ThrottleTimeMs", T::kInt32, 1},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 1, N, 1},
    {"NodeId", T::kInt32},
    {"Host", T::kString},
    {"Port", T::kInt32},
}};

// --- JoinGroup (11)
const Schema kJoinGroupProtocol{{
    {"Name", T::kString},
    {"Metadata", T::kBytes},
}};
const Schema kJoinGroupRequest{{
    {"GroupId", T::kString},
    {"SessionTimeoutMs", T::kInt32},
    {"RebalanceTimeoutMs", T::kInt32, 1, N, N, nullptr, -1},
    {"MemberId", T::kString},
    {"GroupInstanceId", T::kString, 5, N, 5},
    {"ProtocolType", T::kString},
    {"Protocols", T::kStructArray, 0, N, N, &kJoinGroupProtocol},
    {"Reason", T::kString, 8, N, 8},
}};
const Schema kJoinGroupMember{{
    {"MemberId", T::kString},
    {"GroupInstanceId", T::kString, 5, N, 5},
    {"Metadata", T::kBytes},
}};
const Schema kJoinGroupResponse{{
    {"ThrottleTimeMs", T::kInt32, 2},
    {"ErrorCode", T::kInt16},
    {"GenerationId", T::kInt32, 0, N, N, nullptr, -1},
    {"ProtocolType", T::kString, 7, N, 7},
    {"ProtocolName", T::kString, 0, N, 7},
    {"Leader", T::kString},
    {"SkipAssignment", T::kBool, 9},
    {"MemberId", T::kString},
    {"Members", T::kStructArray, 0, N, N, &kJoinGroupMember},
}};

// --- Heartbeat (12)
const Schema kHeartbeatRequest{{
    {"GroupId", T::kString},
    {"GenerationId", T::kInt32},
    {"MemberId", T::kString},
    {"GroupInstanceId", T::kString, 3, N, 3},
}};
const Schema kHeartbeatResponse{{
    {"ThrottleTimeMs", T::kInt32, 1},
    {"ErrorCode", T::kInt16},
}};

// --- LeaveGroup (13). From v3 a request names several members.
const Schema kLeavingMember{{
    {"MemberId", T::kString},
    {"GroupInstanceId", T::kString, 3, N, 3},
    {"Reason", T::kString, 5, N, 5},
}};
const Schema kLeaveGroupRequest{{
    {"GroupId", T::kString},
    {"MemberId", T::kString, 0, 2},
    {"Members", T::kStructArray, 3, N, N, &kLeavingMember},
}};
const Schema kLeftMember{{
    {"MemberId", T::kString},
    {"GroupInstanceId", T::kString, 3, N, 3},
    {"ErrorCode", T::kInt16},
}};
const Schema kLeaveGroupResponse{{
    {"ThrottleTimeMs", T::kInt32, 1},
    {"ErrorCode", T::kInt16},
    {"Members", T::kStructArray, 3, N, N, &kLeftMember},
}};

// --- SyncGroup (14)
const Schema kSyncGroupAssignment{{
    {"MemberId", T::kString},
    {"Assignment", T::kBytes},
}};
const Schema kSyncGroupRequest{{
    {"GroupId", T::kString},
    {"GenerationId", T::kInt32},
    {"MemberId", T::kString},
    {"GroupInstanceId", T::kString, 3, N, 3},
    {"ProtocolType", T::kString, 5, N, 5},
    {"ProtocolName", T::kString, 5, N, 5},
    {"Assignments", T::kStructArray, 0, N, N, &kSyncGroupAssignment},
}};
const Schema kSyncGroupResponse{{
    {"ThrottleTimeMs", T::kInt32, 1},
    {"ErrorCode", T::kInt16},
    {"ProtocolType", T::kString, 5, N, 5},
    {"ProtocolName", T::kString, 5, N, 5},
    {"Assignment", T::kBytes},
}};

// --- OffsetCommit (8)
const Schema kOffsetCommitPartition{{
    {"PartitionIndex", T::kInt32},
    {"CommittedOffset", T::kInt64},
    {"CommittedLeaderEpoch", T::kInt32, 6, N, N, nullptr, -1},
    {"CommitTimestamp", T::kInt64, 1, 1, N, nullptr, -1},
    {"CommittedMetadata", T::kString, 0, N, 0},
}};
const Schema kOffsetCommitTopic{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kOffsetCommitPartition},
}};
const Schema kOffsetCommitRequest{{
    {"GroupId", T::kString},
    {"GenerationId", T::kInt32, 1, N, N, nullptr, -1},
    {"MemberId", T::kString, 1},
    {"GroupInstanceId", T::kString, 7, N, 7},
    {"RetentionTimeMs", T::kInt64, 2, 4, N, nullptr, -1},
    {"Topics", T::kStructArray, 0, N, N, &kOffsetCommitTopic},
}};
const Schema kOffsetCommitPartitionResponse{{
    {"PartitionIndex", T::kInt32},
    {"ErrorCode", T::kInt16},
}};
const Schema kOffsetCommitTopicResponse{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kOffsetCommitPartitionResponse},
}};
const Schema kOffsetCommitResponse{{
    {"ThrottleTimeMs", T::kInt32, 3},
    {"Topics", T::kStructArray, 0, N, N, &kOffsetCommitTopicResponse},
}};

// --- OffsetFetch (9)
const Schema kOffsetFetchTopic{{
    {"Name", T::kString},
    {"PartitionIndexes", T::kInt32Array},
}};
const Schema kOffsetFetchRequest{{
    {"GroupId", T::kString},
    {"Topics", T::kStructArray, 0, N, 2, &kOffsetFetchTopic},
    {"RequireStable", T::kBool, 7},
}};
const Schema kOffsetFetchPartitionResponse{{
    {"PartitionIndex", T::kInt32},
    {"CommittedOffset", T::kInt64},
    {"CommittedLeaderEpoch", T::kInt32, 5, N, N, nullptr, -1},
    {"Metadata", T::kString, 0, N, 0},
    {"ErrorCode", T::kInt16},
}};
const Schema kOffsetFetchTopicResponse{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kOffsetFetchPartitionResponse},
}};
const Schema kOffsetFetchResponse{{
    {"ThrottleTimeMs", T::kInt32, 3},
    {"Topics", T::kStructArray, 0, N, N, &kOffsetFetchTopicResponse},
    {"ErrorCode", T::kInt16, 2},
}};

// --- DescribeGroups (15)
const Schema kDescribeGroupsRequest{{
    {"Groups", T::kStringArray},
    {"IncludeAuthorizedOperations", T::kBool, 3},
}};
const Schema kDescribedGroupMember{{
    {"MemberId", T::kString},
    {"GroupInstanceId", T::kString, 4, N, 4},
    {"ClientId", T::kString},
    {"ClientHost", T::kString},
    {"MemberMetadata", T::kBytes},
    {"MemberAssignment", T::kBytes},
}};
const Schema kDescribedGroup{{
    {"ErrorCode", T::kInt16},
    {"GroupId", T::kString},
    {"GroupState", T::kString},
    {"ProtocolType", T::kString},
    {"ProtocolData", T::kString},
    {"Members", T::kStructArray, 0, N, N, &kDescribedGroupMember},
    {"AuthorizedOperations", T::kInt32, 3, N, N, nullptr, INT32_MIN},
}};
const Schema kDescribeGroupsResponse{{
    {"ThrottleTimeMs", T::kInt32, 1},
    {"Groups", T::kStructArray, 0, N, N, &kDescribedGroup},
}};

// --- ListGroups (16)
const Schema kListGroupsRequest{{
    {"StatesFilter", T::kStringArray, 4},
}};
const Schema kListedGroup{{
    {"GroupId", T::kString},
    {"ProtocolType", T::kString},
    {"GroupState", T::kString, 4},
}};
const Schema kListGroupsResponse{{
    {"ThrottleTimeMs", T::kInt32, 1},
    {"ErrorCode", T::kInt16},
    {"Groups", T::kStructArray, 0, N, N, &kListedGroup},
}};

// --- CreateTopics (19)
const Schema kCreatableReplicaAssignment{{
    {"PartitionIndex", T::kInt32},
    {"BrokerIds", T::kInt32Array},
}};
const Schema kCreatableTopicConfig{{
    {"Name", T::kString},
    {"Value", T::kString, 0, N, 0},
}};
const Schema kCreatableTopic{{
    {"Name", T::kString},
    {"NumPartitions", T::kInt32},
    {"ReplicationFactor", T::kInt16},
    {"Assignments", T::kStructArray, 0, N, N, &kCreatableReplicaAssignment},
    {"Configs", T::kStructArray, 0, N, N, &kCreatableTopicConfig},
}};
const Schema kCreateTopicsRequest{{
    {"Topics", T::kStructArray, 0, N, N, &kCreatableTopic},
    {"TimeoutMs", T::kInt32},
    {"ValidateOnly", T::kBool, 1},
}};
const Schema kCreatableTopicConfigs{{
    {"Name", T::kString},
    {"Value", T::kString, 0, N, 0},
    {"ReadOnly", T::kBool},
    {"ConfigSource", T::kInt8, 0, N, N, nullptr, -1},
    {"IsSensitive", T::kBool},
}};
const Schema kCreatableTopicResult{{
    {"Name", T::kString},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 1, N, 0},
    {"NumPartitions", T::kInt32, 5, N, N, nullptr, -1},
    {"ReplicationFactor", T::kInt16, 5, N, N, nullptr, -1},
    {"Configs", T::kStructArray, 5, N, 5, &kCreatableTopicConfigs},
}};
const Schema kCreateTopicsResponse{{
    {"ThrottleTimeMs", T::kInt32, 2},
    {"Topics", T::kStructArray, 0, N, N, &kCreatableTopicResult},
}};

// --- DeleteTopics (20)
const Schema kDeleteTopicsRequest{{
    {"TopicNames", T::kStringArray},
    {"TimeoutMs", T::kInt32},
}};
const Schema kDeletableTopicResult{{
    {"Name", T::kString},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 5, N, 5},
}};
const Schema kDeleteTopicsResponse{{
    {"ThrottleTimeMs", T::kInt32, 1},
    {"Responses", T::kStructArray, 0, N, N, &kDeletableTopicResult},
}};

// --- CreatePartitions (37)
const Schema kCreatePartitionsAssignment{{
    {"BrokerIds", T::kInt32Array},
}};
const Schema kCreatePartitionsTopic{{
    {"Name", T::kString},
    {"Count", T::kInt32},
    {"Assignments", T::kStructArray, 0, N, 0, &kCreatePartitionsAssignment},
}};
const Schema kCreatePartitionsRequest{{
    {"Topics", T::kStructArray, 0, N, N, &kCreatePartitionsTopic},
    {"TimeoutMs", T::kInt32},
    {"ValidateOnly", T::kBool},
}};
const Schema kCreatePartitionsTopicResult{{
    {"Name", T::kString},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
}};
const Schema kCreatePartitionsResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"Results", T::kStructArray, 0, N, N, &kCreatePartitionsTopicResult},
}};

// --- DescribeConfigs (32)
const Schema kDescribeConfigsResource{{
    {"ResourceType", T::kInt8},
    {"ResourceName", T::kString},
    {"ConfigurationKeys", T::kStringArray, 0, N, 0},
}};
const Schema kDescribeConfigsRequest{{
    {"Resources", T::kStructArray, 0, N, N, &kDescribeConfigsResource},
    {"IncludeSynonyms", T::kBool, 1},
    {"IncludeDocumentation", T::kBool, 3},
}};
const Schema kDescribeConfigsSynonym{{
    {"Name", T::kString},
    {"Value", T::kString, 0, N, 0},
    {"Source", T::kInt8},
}};
const Schema kDescribeConfigsResourceResult{{
    {"Name", T::kString},
    {"Value", T::kString, 0, N, 0},
    {"ReadOnly", T::kBool},
    {"IsDefault", T::kBool, 0, 0},
    {"ConfigSource", T::kInt8, 1, N, N, nullptr, -1},
    {"IsSensitive", T::kBool},
    {"Synonyms", T::kStructArray, 1, N, N, &kDescribeConfigsSynonym},
    {"ConfigType", T::kInt8, 3},
    {"Documentation", T::kString, 3, N, 0},
}};
const Schema kDescribeConfigsResult{{
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
    {"ResourceType", T::kInt8},
    {"ResourceName", T::kString},
    {"Configs", T::kStructArray, 0, N, N, &kDescribeConfigsResourceResult},
}};
const Schema kDescribeConfigsResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"Results", T::kStructArray, 0, N, N, &kDescribeConfigsResult},
}};

// --- DeleteGroups (42)
const Schema kDeleteGroupsRequest{{
    {"GroupsNames", T::kStringArray},
}};
const Schema kDeletableGroupResult{{
    {"GroupId", T::kString},
    {"ErrorCode", T::kInt16},
}};
const Schema kDeleteGroupsResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"Results", T::kStructArray, 0, N, N, &kDeletableGroupResult},
}};

// --- InitProducerId (22)
const Schema kInitProducerIdRequest{{
    {"TransactionalId", T::kString, 0, N, 0},
    {"TransactionTimeoutMs", T::kInt32},
    {"ProducerId", T::kInt64, 3, N, N, nullptr, -1},
    {"ProducerEpoch", T::kInt16, 3, N, N, nullptr, -1},
}};
const Schema kInitProducerIdResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"ErrorCode", T::kInt16},
    {"ProducerId", T::kInt64, 0, N, N, nullptr, -1},
    {"ProducerEpoch", T::kInt16},
}};

// --- SaslHandshake (17)
const Schema kSaslHandshakeRequest{{
    {"Mechanism", T::kString},
}};
const Schema kSaslHandshakeResponse{{
    {"ErrorCode", T::kInt16},
    {"Mechanisms", T::kStringArray},
}};

// --- SaslAuthenticate (36)
const Schema kSaslAuthenticateRequest{{
    {"AuthBytes", T::kBytes},
}};
const Schema kSaslAuthenticateResponse{{
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
    {"AuthBytes", T::kBytes},
    {"SessionLifetimeMs", T::kInt64, 1},
}};

// --- DeleteRecords (21)
const Schema kDeleteRecordsPartition{{
    {"PartitionIndex", T::kInt32},
    {"Offset", T::kInt64},
}};
const Schema kDeleteRecordsTopic{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kDeleteRecordsPartition},
}};
const Schema kDeleteRecordsRequest{{
    {"Topics", T::kStructArray, 0, N, N, &kDeleteRecordsTopic},
    {"TimeoutMs", T::kInt32},
}};
const Schema kDeleteRecordsPartitionResult{{
    {"PartitionIndex", T::kInt32},
    {"LowWatermark", T::kInt64},
    {"ErrorCode", T::kInt16},
}};
const Schema kDeleteRecordsTopicResult{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kDeleteRecordsPartitionResult},
}};
const Schema kDeleteRecordsResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"Topics", T::kStructArray, 0, N, N, &kDeleteRecordsTopicResult},
}};

// --- OffsetForLeaderEpoch (23)
const Schema kOffsetForLeaderPartition{{
    {"Partition", T::kInt32},
    {"CurrentLeaderEpoch", T::kInt32, 2, N, N, nullptr, -1},
    {"LeaderEpoch", T::kInt32},
}};
const Schema kOffsetForLeaderTopic{{
    {"Topic", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kOffsetForLeaderPartition},
}};
const Schema kOffsetForLeaderEpochRequest{{
    {"ReplicaId", T::kInt32, 3, N, N, nullptr, -2},
    {"Topics", T::kStructArray, 0, N, N, &kOffsetForLeaderTopic},
}};
const Schema kEpochEndOffset{{
    {"ErrorCode", T::kInt16},
    {"Partition", T::kInt32},
    {"LeaderEpoch", T::kInt32, 1, N, N, nullptr, -1},
    {"EndOffset", T::kInt64, 0, N, N, nullptr, -1},
}};
const Schema kOffsetForLeaderTopicResult{{
    {"Topic", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kEpochEndOffset},
}};
const Schema kOffsetForLeaderEpochResponse{{
    {"ThrottleTimeMs", T::kInt32, 2},
    {"Topics", T::kStructArray, 0, N, N, &kOffsetForLeaderTopicResult},
}};

// --- AlterConfigs (33)
const Schema kAlterableConfig{{
    {"Name", T::kString},
    {"Value", T::kString, 0, N, 0},
}};
const Schema kAlterConfigsResource{{
    {"ResourceType", T::kInt8},
    {"ResourceName", T::kString},
    {"Configs", T::kStructArray, 0, N, N, &kAlterableConfig},
}};
const Schema kAlterConfigsRequest{{
    {"Resources", T::kStructArray, 0, N, N, &kAlterConfigsResource},
    {"ValidateOnly", T::kBool},
}};
// The same response layout serves IncrementalAlterConfigs.
const Schema kAlterConfigsResourceResponse{{
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
    {"ResourceType", T::kInt8},
    {"ResourceName", T::kString},
}};
const Schema kAlterConfigsResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"Responses", T::kStructArray, 0, N, N, &kAlterConfigsResourceResponse},
}};

// --- IncrementalAlterConfigs (44)
const Schema kIncrementalAlterableConfig{{
    {"Name", T::kString},
    {"ConfigOperation", T::kInt8},
    {"Value", T::kString, 0, N, 0},
}};
const Schema kIncrementalAlterConfigsResource{{
    {"ResourceType", T::kInt8},
    {"ResourceName", T::kString},
    {"Configs", T::kStructArray, 0, N, N, &kIncrementalAlterableConfig},
}};
const Schema kIncrementalAlterConfigsRequest{{
    {"Resources", T::kStructArray, 0, N, N, &kIncrementalAlterConfigsResource},
    {"ValidateOnly", T::kBool},
}};

// --- DescribeLogDirs (35). A null topic list asks for every partition.
const Schema kDescribableLogDirTopic{{
    {"Topic", T::kString},
    {"Partitions", T::kInt32Array},
}};
const Schema kDescribeLogDirsRequest{{
    {"Topics", T::kStructArray, 0, N, 0, &kDescribableLogDirTopic},
}};
const Schema kDescribeLogDirsPartition{{
    {"PartitionIndex", T::kInt32},
    {"PartitionSize", T::kInt64},
    {"OffsetLag", T::kInt64},
    {"IsFutureKey", T::kBool},
}};
const Schema kDescribeLogDirsTopic{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kDescribeLogDirsPartition},
}};
const Schema kDescribeLogDirsResult{{
    {"ErrorCode", T::kInt16},
    {"LogDir", T::kString},
    {"Topics", T::kStructArray, 0, N, N, &kDescribeLogDirsTopic},
    {"TotalBytes", T::kInt64, 4, N, N, nullptr, -1},
    {"UsableBytes", T::kInt64, 4, N, N, nullptr, -1},
}};
const Schema kDescribeLogDirsResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"ErrorCode", T::kInt16, 3},
    {"Results", T::kStructArray, 0, N, N, &kDescribeLogDirsResult},
}};

// --- OffsetDelete (47)
const Schema kOffsetDeleteRequestPartition{{
    {"PartitionIndex", T::kInt32},
}};
const Schema kOffsetDeleteRequestTopic{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kOffsetDeleteRequestPartition},
}};
const Schema kOffsetDeleteRequest{{
    {"GroupId", T::kString},
    {"Topics", T::kStructArray, 0, N, N, &kOffsetDeleteRequestTopic},
}};
const Schema kOffsetDeleteResponsePartition{{
    {"PartitionIndex", T::kInt32},
    {"ErrorCode", T::kInt16},
}};
const Schema kOffsetDeleteResponseTopic{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kOffsetDeleteResponsePartition},
}};
const Schema kOffsetDeleteResponse{{
    {"ErrorCode", T::kInt16},
    {"ThrottleTimeMs", T::kInt32},
    {"Topics", T::kStructArray, 0, N, N, &kOffsetDeleteResponseTopic},
}};

// --- DescribeUserScramCredentials (50); Users null: every user
const Schema kScramUserName{{
    {"Name", T::kString},
}};
const Schema kDescribeUserScramCredentialsRequest{{
    {"Users", T::kStructArray, 0, N, 0, &kScramUserName},
}};
const Schema kScramCredentialInfo{{
    {"Mechanism", T::kInt8},
    {"Iterations", T::kInt32},
}};
const Schema kDescribeUserScramCredentialsResult{{
    {"User", T::kString},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
    {"CredentialInfos", T::kStructArray, 0, N, N, &kScramCredentialInfo},
}};
const Schema kDescribeUserScramCredentialsResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
    {"Results", T::kStructArray, 0, N, N, &kDescribeUserScramCredentialsResult},
}};

// --- AlterUserScramCredentials (51)
const Schema kScramCredentialDeletion{{
    {"Name", T::kString},
    {"Mechanism", T::kInt8},
}};
const Schema kScramCredentialUpsertion{{
    {"Name", T::kString},
    {"Mechanism", T::kInt8},
    {"Iterations", T::kInt32},
    {"Salt", T::kBytes},
    {"SaltedPassword", T::kBytes},
}};
const Schema kAlterUserScramCredentialsRequest{{
    {"Deletions", T::kStructArray, 0, N, N, &kScramCredentialDeletion},
    {"Upsertions", T::kStructArray, 0, N, N, &kScramCredentialUpsertion},
}};
const Schema kAlterUserScramCredentialsResult{{
    {"User", T::kString},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
}};
const Schema kAlterUserScramCredentialsResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"Results", T::kStructArray, 0, N, N, &kAlterUserScramCredentialsResult},
}};

// --- DescribeCluster (60)
const Schema kDescribeClusterRequest{{
    {"IncludeClusterAuthorizedOperations", T::kBool},
    {"EndpointType", T::kInt8, 1, N, N, nullptr, 1},
}};
const Schema kDescribeClusterBroker{{
    {"BrokerId", T::kInt32},
    {"Host", T::kString},
    {"Port", T::kInt32},
    {"Rack", T::kString, 0, N, 0},
}};
const Schema kDescribeClusterResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
    {"EndpointType", T::kInt8, 1, N, N, nullptr, 1},
    {"ClusterId", T::kString},
    {"ControllerId", T::kInt32, 0, N, N, nullptr, -1},
    {"Brokers", T::kStructArray, 0, N, N, &kDescribeClusterBroker},
    {"ClusterAuthorizedOperations", T::kInt32, 0, N, N, nullptr, INT32_MIN},
}};

// --- DescribeProducers (61)
const Schema kDescribeProducersTopic{{
    {"Name", T::kString},
    {"PartitionIndexes", T::kInt32Array},
}};
const Schema kDescribeProducersRequest{{
    {"Topics", T::kStructArray, 0, N, N, &kDescribeProducersTopic},
}};
const Schema kProducerStateResult{{
    {"ProducerId", T::kInt64},
    {"ProducerEpoch", T::kInt32},
    {"LastSequence", T::kInt32, 0, N, N, nullptr, -1},
    {"LastTimestamp", T::kInt64, 0, N, N, nullptr, -1},
    {"CurrentTxnStartTimestamp", T::kInt64, 0, N, N, nullptr, -1},
}};
const Schema kDescribeProducersPartition{{
    {"PartitionIndex", T::kInt32},
    {"ErrorCode", T::kInt16},
    {"ErrorMessage", T::kString, 0, N, 0},
    {"ActiveProducers", T::kStructArray, 0, N, N, &kProducerStateResult},
}};
const Schema kDescribeProducersTopicResult{{
    {"Name", T::kString},
    {"Partitions", T::kStructArray, 0, N, N, &kDescribeProducersPartition},
}};
const Schema kDescribeProducersResponse{{
    {"ThrottleTimeMs", T::kInt32},
    {"Topics", T::kStructArray, 0, N, N, &kDescribeProducersTopicResult},
}};

// Produce starts at v3: record batches (message format v2) only. Fetch
// starts at v4 for the same reason, and stops at v12: v13 names topics by
// id. The tagged fields of later versions (Produce 10-11, Fetch 12's
// ClusterId, diverging epochs, current leader) are neither read nor sent.
// The group and admin APIs are served up to the versions before topic ids
// and batched groups (OffsetFetch 8, FindCoordinator 4, DeleteTopics 6,
// CreateTopics 7) and before KIP-848's consumer protocol (OffsetCommit 9),
// flexible versions included, so newer clients do not fall back.
const std::array<ApiSpec, 32> kApis{{
    {kProduce, "Produce", 3, 9, 9, &kProduceRequest, &kProduceResponse},
    {kFetch, "Fetch", 4, 12, 12, &kFetchRequest, &kFetchResponse},
    {kListOffsets, "ListOffsets", 0, 6, 6, &kListOffsetsRequest, &kListOffsetsResponse},
    {kMetadata, "Metadata", 0, 9, 9, &kMetadataRequest, &kMetadataResponse},
    {kOffsetCommit, "OffsetCommit", 0, 8, 8, &kOffsetCommitRequest, &kOffsetCommitResponse},
    {kOffsetFetch, "OffsetFetch", 1, 7, 6, &kOffsetFetchRequest, &kOffsetFetchResponse},
    {kFindCoordinator, "FindCoordinator", 0, 3, 3, &kFindCoordinatorRequest, &kFindCoordinatorResponse},
    {kJoinGroup, "JoinGroup", 0, 9, 6, &kJoinGroupRequest, &kJoinGroupResponse},
    {kHeartbeat, "Heartbeat", 0, 4, 4, &kHeartbeatRequest, &kHeartbeatResponse},
    {kLeaveGroup, "LeaveGroup", 0, 5, 4, &kLeaveGroupRequest, &kLeaveGroupResponse},
    {kSyncGroup, "SyncGroup", 0, 5, 4, &kSyncGroupRequest, &kSyncGroupResponse},
    {kDescribeGroups, "DescribeGroups", 0, 5, 5, &kDescribeGroupsRequest, &kDescribeGroupsResponse},
    {kListGroups, "ListGroups", 0, 4, 3, &kListGroupsRequest, &kListGroupsResponse},
    {kSaslHandshake, "SaslHandshake", 0, 1, N, &kSaslHandshakeRequest, &kSaslHandshakeResponse},
    {kApiVersions, "ApiVersions", 0, 3, 3, &kApiVersionsRequest, &kApiVersionsResponse},
    {kCreateTopics, "CreateTopics", 0, 6, 5, &kCreateTopicsRequest, &kCreateTopicsResponse},
    {kDeleteTopics, "DeleteTopics", 0, 5, 4, &kDeleteTopicsRequest, &kDeleteTopicsResponse},
    {kDeleteRecords, "DeleteRecords", 0, 2, 2, &kDeleteRecordsRequest, &kDeleteRecordsResponse},
    {kInitProducerId, "InitProducerId", 0, 4, 2, &kInitProducerIdRequest, &kInitProducerIdResponse},
    {kOffsetForLeaderEpoch, "OffsetForLeaderEpoch", 0, 4, 4, &kOffsetForLeaderEpochRequest,
     &kOffsetForLeaderEpochResponse},
    {kDescribeConfigs, "DescribeConfigs", 0, 4, 4, &kDescribeConfigsRequest, &kDescribeConfigsResponse},
    {kAlterConfigs, "AlterConfigs", 0, 2, 2, &kAlterConfigsRequest, &kAlterConfigsResponse},
    {kDescribeLogDirs, "DescribeLogDirs", 0, 4, 2, &kDescribeLogDirsRequest, &kDescribeLogDirsResponse},
    {kSaslAuthenticate, "SaslAuthenticate", 0, 2, 2, &kSaslAuthenticateRequest, &kSaslAuthenticateResponse},
    {kCreatePartitions, "CreatePartitions", 0, 3, 2, &kCreatePartitionsRequest, &kCreatePartitionsResponse},
    {kDeleteGroups, "DeleteGroups", 0, 2, 2, &kDeleteGroupsRequest, &kDeleteGroupsResponse},
    {kIncrementalAlterConfigs, "IncrementalAlterConfigs", 0, 1, 1, &kIncrementalAlterConfigsRequest,
     &kAlterConfigsResponse},
    {kOffsetDelete, "OffsetDelete", 0, 0, N, &kOffsetDeleteRequest, &kOffsetDeleteResponse},
    {kDescribeUserScramCredentials, "DescribeUserScramCredentials", 0, 0, 0, &kDescribeUserScramCredentialsRequest,
     &kDescribeUserScramCredentialsResponse},
    {kAlterUserScramCredentials, "AlterUserScramCredentials", 0, 0, 0, &kAlterUserScramCredentialsRequest,
     &kAlterUserScramCredentialsResponse},
    {kDescribeCluster, "DescribeCluster", 0, 1, 0, &kDescribeClusterRequest, &kDescribeClusterResponse},
    {kDescribeProducers, "DescribeProducers", 0, 0, 0, &kDescribeProducersRequest, &kDescribeProducersResponse},
}};

}  // namespace

std::span<const ApiSpec> served_apis() { return kApis; }

const ApiSpec* find_api(int16_t key) {
  for (const ApiSpec& a : kApis) {
    if (a.key == key) return &a;
  }
  return nullptr;
}

}  // namespace magnetar::protocol::kafka
