// GET_TOPICS_OF_NAMESPACE: the topics a pattern or multi-topic consumer
// subscribes to. The list comes from metadata (partitions of partitioned
// topics and topics with a log), filtered by the client's pattern, with a
// hash so a client polling an unchanged namespace gets no list back. The
// answer grows with the namespace, not with the request: it counts among
// the connection's requests awaiting an answer for the size of the largest
// namespace list the connection asked for, before any pattern filtered it
// (its first, whose size nothing tells, for the whole bytes bound, so it
// is handled alone).
//
// The pattern is compiled (topics_pattern.h: RE2, linear time, bounded
// size) and matched on the connection's reactor: the metadata thread, which
// every connection's metadata calls share, only lists the namespace.
#include <fmt/format.h>

#include "common/crc32c.h"
#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/server/pulsar_connection.h"
#include "protocol/pulsar/server/topics_pattern.h"

namespace magnetar::protocol::pulsar {

using common::Status;

namespace {

// Ours to define: the client only hands it back. CRC32C of the names.
std::string topics_hash(const std::vector<std::string>& topics) {
  uint32_t crc = 0;
  for (const auto& t : topics) {
    crc = common::crc32c::extend(crc, t.data(), t.size());
    crc = common::crc32c::extend(crc, "\n", 1);
  }
  return fmt::format("{:08x}", crc);
}

// The bytes `topics` take in an answer (each name with its field's tag and
// length), and what the answer around them costs.
size_t list_bytes(const std::vector<std::string>& topics) {
  size_t bytes = 64;
  for (const auto& t : topics) bytes += t.size() + 4;
  return bytes;
}

}  // namespace

void handle_get_topics_of_namespace(PulsarConnection& c, const proto::CommandGetTopicsOfNamespace& cmd) {
  uint64_t request_id = cmd.request_id();
  auto ns = broker::NamespaceName::parse(cmd.namespace_());
  if (!ns) {
    c.send(commands::error(request_id, proto::MetadataError, ns.status().message()));
    return;
  }
  // Listing a namespace's topics needs a grant in it, as in Pulsar.
  if (auto allowed = c.service().authorization().check_namespace(c.role, *ns, broker::TopicAction::kLookup);
      !allowed.is_ok()) {
    c.send(commands::error(request_id, proto::AuthorizationError, allowed.message()));
    return;
  }
  std::shared_ptr<const TopicsPattern> pattern;
  if (cmd.has_topics_pattern() && !cmd.topics_pattern().empty()) {
    auto compiled = TopicsPattern::compile(cmd.topics_pattern());
    if (!compiled.is_ok()) {
      const std::string& p = cmd.topics_pattern();
      const std::string shown = p.size() > 200 ? p.substr(0, 200) + "..." : p;
      c.send(commands::error(request_id, proto::MetadataError,
                             "invalid topics pattern '" + shown + "': " + compiled.status().message()));
      return;
    }
    pattern = std::move(compiled).value();
  }
  std::vector<broker::TopicDomain> domains;
  if (cmd.mode() != proto::CommandGetTopicsOfNamespace::NON_PERSISTENT) {
    domains.push_back(broker::TopicDomain::kPersistent);
  }
  if (cmd.mode() != proto::CommandGetTopicsOfNamespace::PERSISTENT) {
    domains.push_back(broker::TopicDomain::kNonPersistent);
  }
  std::string client_hash = cmd.topics_hash();
  auto* tenancy = c.service().tenancy();
  Status st = c.service().on_metadata_thread([tenancy, ns = *ns, domains, pattern = std::move(pattern), client_hash,
                                              request_id, reply = c.request_replier(c.topic_list_bytes())]() {
    std::vector<std::string> listed_topics;
    Status failed;
    for (auto d : domains) {
      auto listed = tenancy->list_topics(ns, d);
      if (!listed.is_ok()) {
        failed = listed.status();
        break;
      }
      for (auto& t : *listed) listed_topics.push_back(std::move(t));
    }
    reply([failed, topics = std::move(listed_topics), pattern, client_hash, request_id](PulsarConnection& conn) mutable {
      if (!failed.is_ok()) {
        conn.send(commands::error(request_id, failed.code() == common::ErrorCode::kNotFound ? proto::MetadataError
                                                                                            : server_error(failed),
                                  failed.message()));
        return;
      }
      // What the request held until here is the list as the namespace has
      // it, whatever the pattern keeps of it.
      conn.remember_topic_list(list_bytes(topics));
      const bool filtered = pattern != nullptr;
      if (filtered) std::erase_if(topics, [&pattern](const std::string& t) { return !pattern->matches(t); });
      proto::BaseCommand out;
      out.set_type(proto::BaseCommand::GET_TOPICS_OF_NAMESPACE_RESPONSE);
      auto* r = out.mutable_gettopicsofnamespaceresponse();
      r->set_request_id(request_id);
      r->set_filtered(filtered);
      std::string hash = topics_hash(topics);
      r->set_topics_hash(hash);
      if (!client_hash.empty() && client_hash == hash) {
        r->set_changed(false);
      } else {
        for (const auto& t : topics) r->add_topics(t);
      }
      conn.send(out);
    });
  });
  if (!st.is_ok()) c.send(commands::error(request_id, proto::ServiceNotReady, st.message()));
}

}  // namespace magnetar::protocol::pulsar
