// DescribeLogDirs: this broker has one log directory, its data directory
// (entries of every topic share its segment files), with the size of each
// partition it holds: the payload bytes of its log's ledgers. As a Kafka
// broker lists only the replicas it has, a cluster member lists the
// partitions it owns and leaves the others out. A null topic list asks for
// every partition of the connection's namespace; naming partitions loads
// their topics, listing them all loads every topic (an admin call). The
// offset lag is 0: the log end is the high watermark on the only replica.
// v4's TotalBytes and UsableBytes are the data directory's file system's.
#include <sys/statvfs.h>

#include <filesystem>
#include <map>

#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/partition_calls.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Status;

namespace {

struct PartitionSize {
  bool held = false;  // owned here and loaded
  int64_t bytes = 0;
};

void answer_log_dirs(KafkaConnection& c, const Request& request, ErrorCode error,
                     const std::vector<TopicPartition>& partitions, const std::vector<PartitionSize>& sizes) {
  const std::string& dir = c.service().options().log_dir;
  std::error_code ec;
  const std::string absolute = dir.empty() ? dir : std::filesystem::absolute(dir, ec).lexically_normal().string();
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  resp.set("ErrorCode", int64_t{error});
  auto& result = resp.add("Results");
  result.set("ErrorCode", int64_t{error});
  result.set("LogDir", absolute);
  struct statvfs fs {};
  if (!dir.empty() && statvfs(dir.c_str(), &fs) == 0) {
    result.set("TotalBytes", static_cast<int64_t>(fs.f_blocks) * static_cast<int64_t>(fs.f_frsize));
    result.set("UsableBytes", static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize));
  }
  std::map<std::string, std::vector<std::pair<int32_t, int64_t>>> by_topic;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k].held) by_topic[partitions[k].topic].emplace_back(partitions[k].partition, sizes[k].bytes);
  }
  for (const auto& [name, held] : by_topic) {
    auto& topic = result.add("Topics");
    topic.set("Name", name);
    for (const auto& [index, bytes] : held) {
      auto& p = topic.add("Partitions");
      p.set("PartitionIndex", int64_t{index});
      p.set("PartitionSize", bytes);
      p.set("OffsetLag", int64_t{0});
      p.set("IsFutureKey", int64_t{0});
    }
  }
  c.respond(request, resp);
}

void describe_partitions(KafkaConnection& c, const Request& request, std::vector<TopicPartition> partitions) {
  PartitionWork<PartitionSize> work = [](size_t, Result<broker::Topic*> t, std::function<void(PartitionSize)> answer) {
    if (!t.is_ok()) return answer({});
    answer({true, static_cast<int64_t>((*t)->log().chain().total_size())});
  };
  auto done = [request, partitions](KafkaConnection& conn, std::vector<PartitionSize> sizes) {
    answer_log_dirs(conn, request, kNone, partitions, sizes);
  };
  on_each_partition<PartitionSize>(c, std::move(partitions), broker::TopicAction::kLookup, std::move(work),
                                   std::move(done));
}

}  // namespace

void handle_describe_log_dirs(KafkaConnection& c, const Request& request) {
  if (Status allowed = may_administer(c); !allowed.is_ok()) {
    return answer_log_dirs(c, request, kClusterAuthorizationFailed, {}, {});
  }
  if (!request.body.is_null("Topics")) {
    std::vector<TopicPartition> partitions;
    for (const Struct& t : request.body.array("Topics")) {
      for (int64_t index : t.ints("Partitions")) partitions.push_back({t.str("Topic"), static_cast<int32_t>(index)});
    }
    return describe_partitions(c, request, std::move(partitions));
  }
  broker::Tenancy* tenancy = c.service().tenancy();
  if (tenancy == nullptr) return answer_log_dirs(c, request, kNone, {}, {});
  // Every partition of the namespace: the topic list is read on the tenancy thread.
  common::Status st = tenancy->submit([tenancy, ns = c.ns(), request, reply = c.replier()]() {
    auto listed = tenancy->list_topics(ns, broker::TopicDomain::kPersistent);
    std::vector<TopicPartition> partitions;
    if (listed.is_ok()) {
      for (const std::string& full : *listed) {
        auto name = broker::TopicName::parse(full);
        if (!name) continue;
        if (name->is_partition()) {
          partitions.push_back({name->base().local, name->partition});
        } else {
          partitions.push_back({name->local, 0});
        }
      }
    }
    reply([request, partitions = std::move(partitions)](KafkaConnection& conn) mutable {
      describe_partitions(conn, request, std::move(partitions));
    });
  });
  if (!st.is_ok()) answer_log_dirs(c, request, error_code(st), {}, {});
}

}  // namespace magnetar::protocol::kafka
