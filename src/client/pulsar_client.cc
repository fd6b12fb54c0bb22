#include "client/pulsar_client.h"

#include <cstdlib>

#include "common/clock.h"
#include "client/compression.h"
#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/commands.h"

namespace magnetar::client {

using common::Result;
using common::Slice;
using common::Status;
namespace pp = protocol::pulsar;
namespace proto = protocol::pulsar::proto;
using Clock = std::chrono::steady_clock;

namespace {

Status server_error(const proto::BaseCommand& cmd) {
  std::string message;
  if (cmd.has_error()) message = cmd.error().message();
  if (cmd.has_send_error()) message = cmd.send_error().message();
  return Status::failed_precondition("the broker refused: " + message);
}

}  // namespace

PulsarClient::PulsarClient(std::unique_ptr<Transport> transport, ClientOptions options)
    : transport_(std::move(transport)), options_(std::move(options)) {}

PulsarClient::~PulsarClient() = default;

Result<std::unique_ptr<PulsarClient>> PulsarClient::connect(const std::string& service_url, ClientOptions options) {
  std::string rest = service_url;
  if (rest.rfind("pulsar://", 0) == 0) {
    rest = rest.substr(9);
  } else if (rest.rfind("pulsar+ssl://", 0) == 0) {
    rest = rest.substr(13);
    options.tls.enabled = true;
  } else if (rest.find("://") != std::string::npos) {
    return Status::invalid_argument("service URL '" + service_url + "' must start with pulsar:// or pulsar+ssl://");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::string port = colon == std::string::npos ? (options.tls.enabled ? "6651" : "6650") : rest.substr(colon + 1);
  if (host.empty()) return Status::invalid_argument("no host in service URL '" + service_url + "'");
  char* end = nullptr;
  unsigned long port_number = std::strtoul(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || port_number == 0 || port_number > 65535) {
    return Status::invalid_argument("bad port in service URL '" + service_url + "'");
  }
  auto transport = Transport::connect(host, static_cast<uint16_t>(port_number), options.tls, options.timeout);
  if (!transport.is_ok()) return transport.status();

  std::unique_ptr<PulsarClient> client(new PulsarClient(std::move(*transport), options));
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::CONNECT);
  cmd.mutable_connect()->set_client_version("magnetar-client");
  cmd.mutable_connect()->set_protocol_version(pp::commands::kMaxProtocolVersion);
  if (!options.token.empty()) {
    cmd.mutable_connect()->set_auth_method_name("token");
    cmd.mutable_connect()->set_auth_data(options.token);
  }
  MAGNETAR_RETURN_IF_ERROR(client->write_all(pp::encode_command(cmd)));
  auto deadline = Clock::now() + options.timeout;
  for (;;) {
    pp::Frame frame;
    MAGNETAR_RETURN_IF_ERROR(client->read_frame(deadline, &frame));
    if (frame.command.type() == proto::BaseCommand::CONNECTED) {
      client->server_version_ = frame.command.connected().server_version();
      return client;
    }
    if (frame.command.type() == proto::BaseCommand::ERROR) return server_error(frame.command);
  }
}

Status PulsarClient::write_all(const Slice& bytes) { return transport_->write_all(bytes.data(), bytes.size()); }

Status PulsarClient::read_frame(Clock::time_point deadline, pp::Frame* out) {
  for (;;) {
    switch (decoder_.decode(input_, out)) {
      case pp::DecodeResult::kFrame:
        if (out->command.type() == proto::BaseCommand::PING) {
          MAGNETAR_RETURN_IF_ERROR(write_all(pp::encode_command(pp::commands::pong())));
          continue;
        }
        return Status::ok();
      case pp::DecodeResult::kNeedMore:
        break;
      default:
        return Status::corruption("the broker sent a frame we cannot read: " + decoder_.status().message());
    }
    if (Clock::now() >= deadline || !transport_->wait_readable(deadline)) {
      return Status::timeout("no answer from the broker in time");
    }
    Slice buf = Slice::allocate(64 << 10);
    auto n = transport_->read_some(buf.mutable_data(), buf.size());
    if (!n.is_ok()) return Status::unavailable("the broker closed the connection (" + n.status().message() + ")");
    if (*n == 0) continue;
    buf.truncate(*n);
    input_.append(std::move(buf));
  }
}

void PulsarClient::queue_message(const pp::Frame& frame) {
  const auto& m = frame.command.message();
  uint64_t consumer = m.consumer_id();
  auto base = [&](ReceivedMessage& r) {
    r.id.ledger = m.message_id().ledgerid();
    r.id.entry = m.message_id().entryid();
    r.id.partition = m.message_id().partition();
    r.producer = frame.metadata.producer_name();
    r.publish_time_ms = frame.metadata.publish_time();
    r.redelivery_count = m.redelivery_count();
  };
  // A reader's start entry: the messages before its start are dropped (all
  // of the entry when the start names no batch index), unless inclusive.
  // Messages dropped here took permits all the same: they count as taken,
  // or the broker runs out of permits before the client asks for more.
  std::optional<int32_t> first_index;  // of the entry's messages, the first to keep
  if (auto start = reader_starts_.find(consumer); start != reader_starts_.end()) {
    const MessageId s = start->second.id;
    if (m.message_id().ledgerid() == s.ledger && m.message_id().entryid() == s.entry) {
      const bool inclusive = start->second.inclusive;
      const bool batched = frame.metadata.has_num_messages_in_batch();
      reader_starts_.erase(start);  // passed: later entries need no check
      if (!inclusive && (s.batch_index < 0 || !batched)) {
        taken_[consumer] += batched ? static_cast<uint32_t>(frame.metadata.num_messages_in_batch()) : 1;
        return;
      }
      first_index = s.batch_index < 0 ? 0 : (inclusive ? s.batch_index : s.batch_index + 1);
    }
  }
  // A payload the client cannot read is still delivered (empty, with the
  // reason), so the application sees it and can acknowledge it.
  Slice payload = frame.payload;
  std::string problem;
  if (frame.metadata.compression() != proto::NONE) {
    auto plain = decompress(frame.metadata.compression(), payload, frame.metadata.uncompressed_size());
    if (plain) {
      payload = std::move(*plain);
    } else {
      problem = plain.status().message();
    }
  }
  if (problem.empty() && frame.metadata.has_num_messages_in_batch()) {
    int32_t count = frame.metadata.num_messages_in_batch();
    auto batch = pp::split_batch(payload, count);
    if (batch.is_ok()) {
      // Indexes the broker says were acknowledged already (ack_set bit 0) are skipped.
      auto acked = [&](int32_t i) {
        if (m.ack_set_size() == 0) return false;
        size_t word = static_cast<size_t>(i) / 64;
        if (word >= static_cast<size_t>(m.ack_set_size())) return false;
        return ((static_cast<uint64_t>(m.ack_set(static_cast<int>(word))) >> (i % 64)) & 1) == 0;
      };
      int32_t index = 0;
      for (auto& single : *batch) {
        int32_t i = index++;
        if (acked(i) || (first_index && i < *first_index) || single.metadata.compacted_out()) {
          ++taken_[consumer];
          continue;
        }
        ReceivedMessage r;
        base(r);
        r.id.batch_index = i;
        r.id.batch_size = count;
        r.payload = single.payload.to_string();
        for (const auto& kv : single.metadata.properties()) r.properties[kv.key()] = kv.value();
        r.key = single.metadata.partition_key();
        if (single.metadata.has_event_time()) r.event_time_ms = single.metadata.event_time();
        inbox_[consumer].push_back(std::move(r));
      }
      return;
    }
    problem = batch.status().message();
  }
  ReceivedMessage r;
  base(r);
  if (problem.empty()) {
    r.payload = payload.to_string();
  } else {
    r.error = problem;
  }
  for (const auto& kv : frame.metadata.properties()) r.properties[kv.key()] = kv.value();
  r.key = frame.metadata.partition_key();
  if (frame.metadata.has_event_time()) r.event_time_ms = frame.metadata.event_time();
  inbox_[consumer].push_back(std::move(r));
}

Result<proto::BaseCommand> PulsarClient::await_request(uint64_t request_id) {
  auto deadline = Clock::now() + options_.timeout;
  auto matches = [request_id](const proto::BaseCommand& c) {
    switch (c.type()) {
      case proto::BaseCommand::SUCCESS: return c.success().request_id() == request_id;
      case proto::BaseCommand::ERROR: return c.error().request_id() == request_id;
      case proto::BaseCommand::PRODUCER_SUCCESS: return c.producer_success().request_id() == request_id;
      case proto::BaseCommand::LOOKUP_RESPONSE: return c.lookuptopicresponse().request_id() == request_id;
      default: return false;
    }
  };
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (matches(it->command)) {
      auto cmd = it->command;
      pending_.erase(it);
      return cmd;
    }
  }
  for (;;) {
    pp::Frame frame;
    MAGNETAR_RETURN_IF_ERROR(read_frame(deadline, &frame));
    if (frame.command.type() == proto::BaseCommand::MESSAGE) {
      queue_message(frame);
    } else if (matches(frame.command)) {
      if (frame.command.type() == proto::BaseCommand::ERROR) return server_error(frame.command);
      return frame.command;
    } else {
      pending_.push_back(std::move(frame));
    }
  }
}

Status PulsarClient::request(proto::BaseCommand& command) {
  MAGNETAR_RETURN_IF_ERROR(write_all(pp::encode_command(command)));
  return Status::ok();
}

Result<std::pair<std::string, bool>> PulsarClient::lookup(const std::string& topic, bool tls) {
  uint64_t request_id = next_request_++;
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::LOOKUP);
  cmd.mutable_lookuptopic()->set_topic(topic);
  cmd.mutable_lookuptopic()->set_request_id(request_id);
  MAGNETAR_RETURN_IF_ERROR(request(cmd));
  auto answer = await_request(request_id);
  if (!answer) return answer.status();
  const auto& r = answer->lookuptopicresponse();
  if (r.response() == proto::CommandLookupTopicResponse::Failed) {
    return Status::unavailable("lookup of " + topic + " failed: " + r.message());
  }
  std::string url = tls ? r.brokerserviceurltls() : r.brokerserviceurl();
  if (url.empty()) return Status::unavailable("lookup of " + topic + " named no " + (tls ? "TLS " : "") + "URL");
  return std::make_pair(url, r.response() == proto::CommandLookupTopicResponse::Redirect);
}

Result<std::string> PulsarClient::service_url_for(const std::string& service_url, const std::string& topic,
                                                  ClientOptions options) {
  const bool tls = service_url.rfind("pulsar+ssl://", 0) == 0;
  std::string url = service_url;
  for (int hop = 0; hop < 5; hop++) {
    auto client = connect(url, options);
    if (!client) return client.status();
    auto answer = (*client)->lookup(topic, tls);
    if (!answer) return answer.status();
    if (!answer->second) return answer->first;
    url = answer->first;  // a Redirect: ask there
  }
  return Status::unavailable("lookup of " + topic + " was redirected more than 5 times");
}

Result<uint64_t> PulsarClient::create_producer(const std::string& topic, const std::string& name) {
  uint64_t id = next_producer_++;
  uint64_t request_id = next_request_++;
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::PRODUCER);
  auto* p = cmd.mutable_producer();
  p->set_topic(topic);
  p->set_producer_id(id);
  p->set_request_id(request_id);
  if (!name.empty()) p->set_producer_name(name);
  MAGNETAR_RETURN_IF_ERROR(request(cmd));
  auto answer = await_request(request_id);
  if (!answer) return answer.status();
  producer_names_[id] = answer->producer_success().producer_name();
  sequence_[id] = 0;
  return id;
}

namespace {

Slice send_frame(uint64_t producer, uint64_t sequence, const std::string& producer_name, std::string_view payload,
                 const std::map<std::string, std::string>& properties, std::string_view key) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::SEND);
  cmd.mutable_send()->set_producer_id(producer);
  cmd.mutable_send()->set_sequence_id(sequence);
  proto::MessageMetadata md;
  md.set_producer_name(producer_name);
  md.set_sequence_id(sequence);
  md.set_publish_time(static_cast<uint64_t>(common::wall_clock_ms()));
  for (const auto& [k, v] : properties) {
    auto* kv = md.add_properties();
    kv->set_key(k);
    kv->set_value(v);
  }
  if (!key.empty()) md.set_partition_key(std::string(key));
  return pp::encode_payload_command(cmd, md, payload);
}

}  // namespace

Result<MessageId> PulsarClient::send(uint64_t producer, std::string_view payload,
                                     const std::map<std::string, std::string>& properties, std::string_view key) {
  auto name = producer_names_.find(producer);
  if (name == producer_names_.end()) return Status::not_found("no producer " + std::to_string(producer));
  uint64_t sequence = sequence_[producer]++;
  MAGNETAR_RETURN_IF_ERROR(write_all(send_frame(producer, sequence, name->second, payload, properties, key)));
  auto deadline = Clock::now() + options_.timeout;
  for (;;) {
    pp::Frame frame;
    MAGNETAR_RETURN_IF_ERROR(read_frame(deadline, &frame));
    const auto& c = frame.command;
    if (c.type() == proto::BaseCommand::SEND_RECEIPT && c.send_receipt().sequence_id() == sequence) {
      return MessageId{c.send_receipt().message_id().ledgerid(), c.send_receipt().message_id().entryid(), -1};
    }
    if (c.type() == proto::BaseCommand::SEND_ERROR && c.send_error().sequence_id() == sequence) {
      return server_error(c);
    }
    if (c.type() == proto::BaseCommand::MESSAGE) queue_message(frame);
  }
}

Result<size_t> PulsarClient::send_many(uint64_t producer, const std::vector<std::string>& payloads, size_t window) {
  auto name = producer_names_.find(producer);
  if (name == producer_names_.end()) return Status::not_found("no producer " + std::to_string(producer));
  size_t sent = 0, acked = 0;
  while (acked < payloads.size()) {
    while (sent < payloads.size() && sent - acked < window) {
      uint64_t sequence = sequence_[producer]++;
      MAGNETAR_RETURN_IF_ERROR(write_all(send_frame(producer, sequence, name->second, payloads[sent], {}, {})));
      ++sent;
    }
    pp::Frame frame;
    MAGNETAR_RETURN_IF_ERROR(read_frame(Clock::now() + options_.timeout, &frame));
    if (frame.command.type() == proto::BaseCommand::SEND_RECEIPT) ++acked;
    if (frame.command.type() == proto::BaseCommand::SEND_ERROR) return server_error(frame.command);
    if (frame.command.type() == proto::BaseCommand::MESSAGE) queue_message(frame);
  }
  return acked;
}

Status PulsarClient::close_producer(uint64_t producer) {
  uint64_t request_id = next_request_++;
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::CLOSE_PRODUCER);
  cmd.mutable_close_producer()->set_producer_id(producer);
  cmd.mutable_close_producer()->set_request_id(request_id);
  MAGNETAR_RETURN_IF_ERROR(request(cmd));
  auto answer = await_request(request_id);
  producer_names_.erase(producer);
  return answer.is_ok() ? Status::ok() : answer.status();
}

Result<uint64_t> PulsarClient::subscribe(const std::string& topic, const std::string& subscription,
                                         SubscriptionType type, bool earliest, uint32_t permits,
                                         const std::string& consumer_name) {
  uint64_t id = next_consumer_++;
  uint64_t request_id = next_request_++;
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::SUBSCRIBE);
  auto* s = cmd.mutable_subscribe();
  s->set_topic(topic);
  s->set_subscription(subscription);
  s->set_subtype(static_cast<proto::CommandSubscribe::SubType>(type));
  s->set_consumer_id(id);
  s->set_request_id(request_id);
  s->set_consumer_name(consumer_name.empty() ? subscription : consumer_name);
  s->set_initialposition(earliest ? proto::CommandSubscribe::Earliest : proto::CommandSubscribe::Latest);
  if (read_compacted_) s->set_read_compacted(true);
  return subscribe_with(cmd, permits);
}

Result<uint64_t> PulsarClient::create_reader(const std::string& topic, std::optional<MessageId> start, bool earliest,
                                             uint32_t permits, bool inclusive) {
  uint64_t id = next_consumer_++;
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::SUBSCRIBE);
  auto* s = cmd.mutable_subscribe();
  s->set_topic(topic);
  s->set_subscription("reader-" + std::to_string(::getpid()) + "-" + std::to_string(id));
  s->set_subtype(proto::CommandSubscribe::Exclusive);
  s->set_consumer_id(id);
  s->set_request_id(next_request_++);
  s->set_durable(false);
  s->set_initialposition(earliest ? proto::CommandSubscribe::Earliest : proto::CommandSubscribe::Latest);
  if (read_compacted_) s->set_read_compacted(true);
  if (start) {
    auto* mid = s->mutable_start_message_id();
    mid->set_ledgerid(start->ledger);
    mid->set_entryid(start->entry);
    if (start->batch_index >= 0) mid->set_batch_index(start->batch_index);
    // What the broker sends before the start arrives once the reader
    // exists, so the start is known by then.
    reader_starts_[id] = ReaderStart{*start, inclusive};
  }
  auto reader = subscribe_with(cmd, permits);
  if (!reader) reader_starts_.erase(id);
  return reader;
}

Result<uint64_t> PulsarClient::subscribe_with(proto::BaseCommand& cmd, uint32_t permits) {
  uint64_t id = cmd.subscribe().consumer_id();
  uint64_t request_id = cmd.subscribe().request_id();
  MAGNETAR_RETURN_IF_ERROR(request(cmd));
  auto answer = await_request(request_id);
  if (!answer) return answer.status();
  proto::BaseCommand flow;
  flow.set_type(proto::BaseCommand::FLOW);
  flow.mutable_flow()->set_consumer_id(id);
  flow.mutable_flow()->set_messagepermits(permits);
  MAGNETAR_RETURN_IF_ERROR(request(flow));
  permits_[id] = permits;
  taken_[id] = 0;
  return id;
}

Result<ReceivedMessage> PulsarClient::receive(uint64_t consumer, std::chrono::milliseconds wait) {
  auto deadline = Clock::now() + wait;
  auto& box = inbox_[consumer];
  while (box.empty()) {
    MAGNETAR_RETURN_IF_ERROR(maybe_flow(consumer));  // messages dropped on arrival gave permits back
    pp::Frame frame;
    MAGNETAR_RETURN_IF_ERROR(read_frame(deadline, &frame));
    if (frame.command.type() == proto::BaseCommand::MESSAGE) {
      queue_message(frame);
    } else if (frame.command.type() == proto::BaseCommand::CLOSE_CONSUMER &&
               frame.command.close_consumer().consumer_id() == consumer) {
      return Status::unavailable("the broker closed this consumer");
    } else {
      pending_.push_back(std::move(frame));
    }
  }
  ReceivedMessage m = std::move(box.front());
  box.pop_front();
  ++taken_[consumer];
  MAGNETAR_RETURN_IF_ERROR(maybe_flow(consumer));
  return m;
}

Status PulsarClient::maybe_flow(uint64_t consumer) {
  // Permits count messages (a batch takes as many as it holds); ask for more
  // once half the window is used.
  auto taken = taken_.find(consumer);
  if (taken == taken_.end() || taken->second < std::max<uint32_t>(1, permits_[consumer] / 2)) return Status::ok();
  proto::BaseCommand flow;
  flow.set_type(proto::BaseCommand::FLOW);
  flow.mutable_flow()->set_consumer_id(consumer);
  flow.mutable_flow()->set_messagepermits(taken->second);
  MAGNETAR_RETURN_IF_ERROR(request(flow));
  taken->second = 0;
  return Status::ok();
}

Status PulsarClient::ack(uint64_t consumer, const MessageId& id) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::ACK);
  auto* a = cmd.mutable_ack();
  a->set_consumer_id(consumer);
  a->set_ack_type(proto::CommandAck::Individual);
  auto* mid = a->add_message_id();
  mid->set_ledgerid(id.ledger);
  mid->set_entryid(id.entry);
  if (id.batch_index >= 0 && id.batch_size > 1) {
    // One message of a batch: ack_set holds a bit per message still unacknowledged
    // (Pulsar's batch-index acknowledgement). Once all are acknowledged the
    // entry itself is.
    auto& acked = batch_acks_[{consumer, id.ledger, id.entry}];
    if (acked.size() != static_cast<size_t>(id.batch_size)) acked.assign(static_cast<size_t>(id.batch_size), false);
    acked[static_cast<size_t>(id.batch_index)] = true;
    bool all = true;
    std::vector<int64_t> words((acked.size() + 63) / 64, 0);
    for (size_t i = 0; i < acked.size(); ++i) {
      if (!acked[i]) {
        all = false;
        words[i / 64] |= int64_t{1} << (i % 64);
      }
    }
    if (all) {
      batch_acks_.erase({consumer, id.ledger, id.entry});
    } else {
      for (int64_t w : words) mid->add_ack_set(w);
      mid->set_batch_index(id.batch_index);
      mid->set_batch_size(id.batch_size);
    }
  }
  return request(cmd);
}

Status PulsarClient::ack_cumulative(uint64_t consumer, const MessageId& id) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::ACK);
  auto* a = cmd.mutable_ack();
  a->set_consumer_id(consumer);
  a->set_ack_type(proto::CommandAck::Cumulative);
  auto* mid = a->add_message_id();
  mid->set_ledgerid(id.ledger);
  mid->set_entryid(id.entry);
  for (auto it = batch_acks_.begin(); it != batch_acks_.end();) {
    auto [c, ledger, entry] = it->first;
    bool covered = c == consumer && (ledger < id.ledger || (ledger == id.ledger && entry <= id.entry));
    it = covered ? batch_acks_.erase(it) : std::next(it);
  }
  return request(cmd);
}

Status PulsarClient::close_consumer(uint64_t consumer) {
  uint64_t request_id = next_request_++;
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::CLOSE_CONSUMER);
  cmd.mutable_close_consumer()->set_consumer_id(consumer);
  cmd.mutable_close_consumer()->set_request_id(request_id);
  MAGNETAR_RETURN_IF_ERROR(request(cmd));
  auto answer = await_request(request_id);
  inbox_.erase(consumer);
  reader_starts_.erase(consumer);
  return answer.is_ok() ? Status::ok() : answer.status();
}

}  // namespace magnetar::client
