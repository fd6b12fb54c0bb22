#include "protocol/amqp/server/amqp_connection.h"

#include <cstring>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/logging.h"
#include "protocol/amqp/convert.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::amqp {

using common::Slice;
using common::Status;

namespace {

// Publishes in flight on one connection (and what waits behind them)
// before it stops reading, and their bytes.
constexpr size_t kMaxPublishesInFlight = 4096;
constexpr size_t kMaxBytesInFlight = 64 << 20;
// How long a connection waits for connection.close-ok after closing.
constexpr std::chrono::milliseconds kCloseGrace{1000};

Method close_method(uint32_t key, const AmqpError& e) {
  Method m = Method::of(key);
  m.set("reply-code", uint64_t{e.code});
  m.set("reply-text", e.text.substr(0, 255));
  m.set("class-id", uint64_t{e.method >> 16});
  m.set("method-id", uint64_t{e.method & 0xffff});
  return m;
}

std::string code_name(uint16_t code) {
  switch (code) {
    case kContentTooLarge: return "CONTENT_TOO_LARGE";
    case kNoRoute: return "NO_ROUTE";
    case kConnectionForced: return "CONNECTION_FORCED";
    case kAccessRefused: return "ACCESS_REFUSED";
    case kNotFound: return "NOT_FOUND";
    case kResourceLocked: return "RESOURCE_LOCKED";
    case kPreconditionFailed: return "PRECONDITION_FAILED";
    case kFrameError: return "FRAME_ERROR";
    case kSyntaxError: return "SYNTAX_ERROR";
    case kCommandInvalid: return "COMMAND_INVALID";
    case kChannelError: return "CHANNEL_ERROR";
    case kUnexpectedFrame: return "UNEXPECTED_FRAME";
    case kResourceError: return "RESOURCE_ERROR";
    case kNotAllowed: return "NOT_ALLOWED";
    case kNotImplemented: return "NOT_IMPLEMENTED";
    default: return "INTERNAL_ERROR";
  }
}

}  // namespace

AmqpConnection::AmqpConnection(runtime::Reactor& reactor, AmqpService& service)
    : reactor_(reactor),
      service_(service),
      id_(service.next_id()),
      producer_id_(service.next_id()),
      link_(std::make_shared<AmqpLink>(AmqpLink{this})),
      held_(kMaxPublishesInFlight, kMaxBytesInFlight),
      throttle_(reactor, [this]() {
        if (conn_ == nullptr || paused_) return;  // publish_finished resumes
        conn_->resume_reading();
        if (input_ != nullptr) on_data(*conn_, *input_);
      }) {
  producer_name_ = fmt::format("amqp-{}-{}", service_.options().cluster_name, id_);
  client_info_.protocol = "amqp";
  client_info_.connected_since_ms = common::wall_clock_ms();
  AmqpMetrics::get().connections.add(1);
}

AmqpConnection::~AmqpConnection() {
  link_->conn = nullptr;
  AmqpMetrics::get().connections.add(-1);
}

void AmqpConnection::send(Slice bytes) {
  if (conn_ == nullptr) return;
  sent_ = true;
  conn_->write(std::move(bytes));
}

void AmqpConnection::send_with_content(uint16_t channel, const Method& m, const Slice& properties, const Slice& body) {
  WireWriter head(256 + properties.size());
  append_method_frame(head, channel, m);
  head.u8(static_cast<uint8_t>(FrameType::kHeader));
  head.u16(channel);
  head.u32(static_cast<uint32_t>(12 + properties.size()));
  encode_content_header(head, body.size(), properties.view());
  head.u8(kFrameEnd);
  // Body frames: the body's own bytes between small frame heads, no copy.
  const size_t chunk = frame_max_ - kFrameOverhead;
  size_t offset = 0;
  while (offset < body.size()) {
    size_t n = std::min(chunk, body.size() - offset);
    head.u8(static_cast<uint8_t>(FrameType::kBody));
    head.u16(channel);
    head.u32(static_cast<uint32_t>(n));
    send(head.finish());
    send(body.sub(offset, n));
    head.u8(kFrameEnd);
    offset += n;
  }
  send(head.finish());
}

void ChannelReplier::operator()(std::function<void(AmqpConnection&, Channel&)> fn) const {
  reply_([fn = std::move(fn), id = channel_, serial = serial_](AmqpConnection& c) {
    if (Channel* ch = c.channel(id, serial)) fn(c, *ch);
  });
}

std::string AmqpConnection::vhost_name() const {
  return vhost_.tenant == "public" && vhost_.local == "default" ? "/" : vhost_.to_string();
}

void AmqpConnection::answer(Channel& ch, const Method& request, const Method& reply) {
  for (size_t k = 0; k < request.spec->args.size(); ++k) {
    if (request.spec->args[k].name == "no-wait" && request.flag("no-wait")) return;
  }
  send_method(ch.id, reply);
}

Channel* AmqpConnection::channel(uint16_t id, uint64_t serial) {
  auto it = channels_.find(id);
  if (it == channels_.end() || it->second.serial != serial || it->second.closing) return nullptr;
  return &it->second;
}

void AmqpConnection::on_data(runtime::Connection& conn, common::SliceChain& input) {
  if (conn_ == nullptr) client_info_.address = conn.peer();
  conn_ = &conn;
  input_ = &input;
  heard_ = true;
  if (state_ == State::kHeader) {
    if (input.size() < kProtocolHeaderBytes) return;
    char header[kProtocolHeaderBytes];
    input.copy_out(header, sizeof header);
    if (std::string_view(header, sizeof header) != std::string_view(kProtocolHeader, sizeof kProtocolHeader)) {
      // The spec's answer to a header it does not speak: the one it does.
      MLOG_INFO("amqp client {}: not an AMQP 0-9-1 protocol header; closing", conn.peer());
      send(Slice::copy_of(kProtocolHeader, sizeof kProtocolHeader));
      input.clear();
      conn.close(Status::invalid_argument("not an AMQP 0-9-1 protocol header"));
      return;
    }
    input.consume(kProtocolHeaderBytes);
    send_start();
    state_ = State::kStartOk;
  }
  while (!conn.closing() && conn.writable() && !paused_ && !throttle_.holding() && state_ != State::kOpening) {
    if (state_ == State::kClosing) {
      // Only connection.close-ok (or close) still matters; a broken stream
      // is dropped whole.
      Frame f;
      DecodeResult r = decode_frame(input, frame_max_, &f);
      if (r == DecodeResult::kNeedMore) return;
      if (r != DecodeResult::kFrame) {
        input.clear();
        return;
      }
      if (f.type == FrameType::kMethod && f.channel == 0) {
        auto method = decode_method(f.payload);
        if (method && (method->key() == m::kConnectionCloseOk || method->key() == m::kConnectionClose)) {
          if (method->key() == m::kConnectionClose) send_method(0, Method::of(m::kConnectionCloseOk));
          finish_close();
          return;
        }
      }
      continue;
    }
    Frame frame;
    DecodeResult r = decode_frame(input, state_ == State::kOpened ? frame_max_ : service_.options().frame_max, &frame);
    if (r == DecodeResult::kNeedMore) return;
    if (r == DecodeResult::kTooLarge) {
      input.clear();
      return connection_error({kFrameError, "frame larger than the negotiated frame-max"});
    }
    if (r == DecodeResult::kBadFrame) {
      input.clear();
      return connection_error({kFrameError, "malformed frame (unknown type or no frame-end octet)"});
    }
    handle_frame(frame);
  }
}

void AmqpConnection::handle_frame(Frame& frame) {
  switch (frame.type) {
    case FrameType::kHeartbeat:
      if (frame.channel != 0) return connection_error({kFrameError, "a heartbeat frame on a channel other than 0"});
      return;
    case FrameType::kHeader:
    case FrameType::kBody: return handle_content_frame(frame);
    case FrameType::kMethod: break;
  }
  auto method = decode_method(frame.payload);
  if (!method) {
    if (method.status().code() == common::ErrorCode::kNotFound) {
      return connection_error({kNotImplemented, method.status().message()});
    }
    return connection_error({kSyntaxError, method.status().message()});
  }
  auto it = channels_.find(frame.channel);
  if (it != channels_.end() && it->second.publishing && !it->second.closing) {
    return connection_error({kUnexpectedFrame, fmt::format("{} while content of basic.publish was expected",
                                                           method->spec->name), method->key()});
  }
  handle_method(frame.channel, *method);
}

void AmqpConnection::handle_content_frame(Frame& frame) {
  auto it = channels_.find(frame.channel);
  if (it != channels_.end() && it->second.closing) return;  // content of a publish the channel refused
  if (it == channels_.end() || !it->second.publishing ||
      (frame.type == FrameType::kHeader) == it->second.header.has_value()) {
    return connection_error({kUnexpectedFrame, fmt::format("a content {} frame where none was expected",
                                                           frame.type == FrameType::kHeader ? "header" : "body")});
  }
  Channel& ch = it->second;
  if (frame.type == FrameType::kHeader) {
    auto header = decode_content_header(frame.payload);
    if (!header) return connection_error({kFrameError, header.status().message(), m::kBasicPublish});
    if (header->body_size > pulsar::kDefaultMaxMessageSize) {
      // Refused before its body arrives: the body frames that follow are
      // dropped with the closed channel, never gathered.
      return channel_error(ch, {kPreconditionFailed,
                                fmt::format("message size {} is larger than the largest message {}",
                                            header->body_size, pulsar::kDefaultMaxMessageSize),
                                m::kBasicPublish});
    }
    ch.header = std::move(*header);
    ch.body.clear();
    ch.body_received = 0;
  } else {
    ch.body_received += frame.payload.size();
    if (ch.body_received > ch.header->body_size) {
      return connection_error({kFrameError, "content body larger than its header said", m::kBasicPublish});
    }
    if (!frame.payload.empty()) ch.body.push_back(std::move(frame.payload));
  }
  if (ch.body_received < ch.header->body_size) return;
  Slice body;
  if (ch.body.size() == 1) {
    body = std::move(ch.body.front());
  } else if (ch.body.size() > 1) {
    body = Slice::allocate(ch.body_received);
    size_t at = 0;
    for (const Slice& s : ch.body) {
      std::memcpy(body.mutable_data() + at, s.data(), s.size());
      at += s.size();
    }
  }
  Method publish = std::move(*ch.publishing);
  ContentHeader header = std::move(*ch.header);
  ch.publishing.reset();
  ch.header.reset();
  ch.body.clear();
  if (!ch.deferred.empty()) {
    defer(ch, {std::move(publish), std::move(header), std::move(body)});
    return;
  }
  handle_publish(*this, ch, publish, header, std::move(body));
}

void AmqpConnection::handle_method(uint16_t channel, Method& method) {
  const uint32_t key = method.key();
  if (state_ != State::kOpened) {
    if (channel != 0) return connection_error({kChannelError, "channels open only after connection.open-ok", key});
    return handshake(method);
  }
  if (channel == 0) {
    switch (key) {
      case m::kConnectionClose:
        // What the client published is stored before it hears close-ok.
        if (publishes_in_flight_ > 0) {
          close_after_publishes_ = true;
          return;
        }
        send_method(0, Method::of(m::kConnectionCloseOk));
        return finish_close();
      case m::kConnectionCloseOk: return finish_close();
      case m::kConnectionBlocked:
      case m::kConnectionUnblocked: return;
      default:
        return connection_error({kCommandInvalid, fmt::format("{} on channel 0", method.spec->name), key});
    }
  }
  if (method.spec->class_id == kConnection) {
    return connection_error({kCommandInvalid, fmt::format("{} on channel {}", method.spec->name, channel), key});
  }
  auto it = channels_.find(channel);
  if (key == m::kChannelOpen) {
    if (it != channels_.end()) {
      return connection_error({kChannelError, fmt::format("channel {} is already open", channel), key});
    }
    if (channel > channel_max_) {
      return connection_error({kChannelError, fmt::format("channel {} is above channel-max {}", channel, channel_max_), key});
    }
    Channel& ch = channels_[channel];
    ch.id = channel;
    ch.serial = next_serial_++;
    ch.prefetch = 0;
    send_method(channel, Method::of(m::kChannelOpenOk));
    return;
  }
  if (it == channels_.end()) {
    return connection_error({kChannelError, fmt::format("{} on channel {}, which is not open", method.spec->name,
                                                        channel), key});
  }
  Channel& ch = it->second;
  if (ch.closing) {
    if (key == m::kChannelCloseOk) {
      channels_.erase(it);
    } else if (key == m::kChannelClose) {
      send_method(channel, Method::of(m::kChannelCloseOk));
      channels_.erase(it);
    }
    return;  // everything else is dropped until close-ok
  }
  handle_channel_method(ch, method);
}

void AmqpConnection::handle_channel_method(Channel& ch, Method& method) {
  const uint32_t key = method.key();
  if (key == m::kBasicPublish) {
    // Its content follows; deferred (if need be) once it is complete.
    ch.publishing = std::move(method);
    return;
  }
  const bool settles = key == m::kBasicAck || key == m::kBasicNack || key == m::kBasicReject;
  if (!ch.deferred.empty() || (ch.publishes_in_flight > 0 && !settles)) {
    defer(ch, {std::move(method), std::nullopt, {}});
    return;
  }
  run_channel_method(ch, method);
}

void AmqpConnection::replay(uint16_t id, uint64_t serial) {
  while (true) {
    Channel* ch = channel(id, serial);
    if (ch == nullptr || ch->deferred.empty()) return;
    Channel::Deferred& front = ch->deferred.front();
    const bool publish = front.header.has_value();
    if (!publish && ch->publishes_in_flight > 0) return;
    Channel::Deferred d = std::move(front);
    ch->deferred.pop_front();
    held_.remove(d.body.size());
    if (publish) {
      handle_publish(*this, *ch, d.method, *d.header, std::move(d.body));
    } else {
      run_channel_method(*ch, d.method);
    }
  }
}

void AmqpConnection::run_channel_method(Channel& ch, Method& method) {
  const uint32_t key = method.key();
  switch (method.spec->class_id) {
    case kChannel:
      switch (key) {
        case m::kChannelClose: {
          uint16_t id = ch.id;
          close_channel(ch);
          send_method(id, Method::of(m::kChannelCloseOk));
          channels_.erase(id);
          return;
        }
        case m::kChannelCloseOk: return;
        case m::kChannelFlow: {
          ch.flow_active = method.flag("active");
          send_method(ch.id, Method::of(m::kChannelFlowOk).set("active", method.u("active")));
          if (!ch.flow_active) return;
          auto held = std::move(ch.held);
          ch.held.clear();
          for (auto& [consumer, entries] : held) deliver(ch.id, ch.serial, consumer, std::move(entries));
          // What priority consumers hold waits for the same.
          if (Channel* still = channel(ch.id, ch.serial)) release_gated(*still);
          return;
        }
        default: break;
      }
      break;
    case kExchange: return handle_exchange(*this, ch, method);
    case kQueue: return handle_queue(*this, ch, method);
    case kBasic:
      switch (key) {
        case m::kBasicQos:
        case m::kBasicConsume:
        case m::kBasicCancel:
        case m::kBasicGet: return handle_consume(*this, ch, method);
        case m::kBasicAck:
        case m::kBasicNack:
        case m::kBasicReject:
        case m::kBasicRecover:
        case m::kBasicRecoverAsync: return handle_ack(*this, ch, method);
        default: break;
      }
      break;
    case kConfirm:
    case kTx: return handle_confirm_tx(*this, ch, method);
    default: break;
  }
  connection_error({kCommandInvalid, fmt::format("{} is not a method a client sends", method.spec->name), key});
}

bool AmqpConnection::authorized(Channel& ch, const broker::TopicName& topic, broker::TopicAction action,
                                uint32_t key) {
  return refused_unless(ch, service_.authorization().check(role_, topic, action), key);
}

bool AmqpConnection::authorized_in_vhost(Channel& ch, broker::TopicAction action, uint32_t key) {
  return refused_unless(ch, service_.authorization().check_namespace(role_, vhost_, action), key);
}

bool AmqpConnection::authorized_admin(Channel& ch, uint32_t key) {
  return refused_unless(ch, service_.authorization().check_tenant_admin(role_, vhost_.tenant), key);
}

bool AmqpConnection::refused_unless(Channel& ch, const common::Status& allowed, uint32_t key) {
  if (allowed.is_ok()) return true;
  channel_error(ch, {kAccessRefused, allowed.message(), key});
  return false;
}

void AmqpConnection::channel_error(Channel& ch, const AmqpError& e) {
  if (is_connection_error(e.code)) return connection_error(e);
  MLOG_DEBUG("amqp client {}: channel {} closed: {} {}", conn_ ? conn_->peer() : "", ch.id, e.code, e.text);
  AmqpMetrics::get().error(e.code);
  AmqpError named = e;
  named.text = code_name(e.code) + " - " + e.text;
  send_method(ch.id, close_method(m::kChannelClose, named));
  close_channel(ch);
}

void AmqpConnection::close_channel(Channel& ch) {
  release_consumers(*this, ch);
  take_tx(ch);  // an open transaction is rolled back
  // What waited behind the channel's publishes never runs now.
  for (const Channel::Deferred& d : ch.deferred) held_.remove(d.body.size());
  ch.deferred.clear();
  maybe_resume();
  ch.closing = true;
  ch.publishing.reset();
  ch.header.reset();
  ch.body.clear();
  ch.unacked.clear();
  // A channel closed by the client is gone now; one we closed waits for
  // close-ok (handle_method).
}

bool AmqpConnection::hold_in_tx(Channel& ch, size_t bytes, uint32_t key) {
  const auto& options = service_.options();
  if (tx_held_ + 1 > options.max_tx_messages) {
    channel_error(ch, {kPreconditionFailed,
                       fmt::format("transaction limit: a connection's transactions hold at most {} publishes and "
                                   "acknowledgements until tx.commit",
                                   options.max_tx_messages),
                       key});
    return false;
  }
  if (tx_held_bytes_ + bytes > options.max_tx_bytes) {
    channel_error(ch, {kPreconditionFailed,
                       fmt::format("transaction limit: a connection's transactions hold at most {} bytes of message "
                                   "bodies until tx.commit",
                                   options.max_tx_bytes),
                       key});
    return false;
  }
  ++tx_held_;
  tx_held_bytes_ += bytes;
  ch.tx_bytes += bytes;
  return true;
}

std::pair<std::vector<Channel::Deferred>, std::vector<Method>> AmqpConnection::take_tx(Channel& ch) {
  std::pair<std::vector<Channel::Deferred>, std::vector<Method>> held;
  held.first.swap(ch.tx_publishes);
  held.second.swap(ch.tx_settles);
  tx_held_ -= held.first.size() + held.second.size();
  tx_held_bytes_ -= ch.tx_bytes;
  ch.tx_bytes = 0;
  return held;
}

void AmqpConnection::connection_error(const AmqpError& e) {
  if (state_ == State::kClosing || conn_ == nullptr) return;
  MLOG_INFO("amqp client {}: connection error {} {}: {}", conn_->peer(), e.code, code_name(e.code), e.text);
  AmqpMetrics::get().error(e.code);
  AmqpError named = e;
  named.text = code_name(e.code) + " - " + e.text;
  send_method(0, close_method(m::kConnectionClose, named));
  state_ = State::kClosing;
  for (auto& [id, ch] : channels_) {
    if (!ch.closing) close_channel(ch);
  }
  close_timer_ = std::make_unique<runtime::Timer>(reactor_);
  close_timer_->once(kCloseGrace, [this]() { finish_close(); });
}

void AmqpConnection::finish_close() {
  if (conn_ != nullptr) conn_->close();
}

void AmqpConnection::defer(Channel& ch, Channel::Deferred d) {
  const size_t bytes = d.body.size();
  ch.deferred.push_back(std::move(d));
  if (held_.add(bytes) && conn_ != nullptr) {
    paused_ = true;
    conn_->pause_reading();
  }
}

void AmqpConnection::publish_started(Channel& ch, size_t bytes) {
  ++ch.publishes_in_flight;
  ++publishes_in_flight_;
  if (held_.add(bytes) && conn_ != nullptr) {
    paused_ = true;
    conn_->pause_reading();
  }
}

uint64_t AmqpConnection::next_confirm(Channel& ch) {
  ch.confirms.push_back(Channel::Confirm::kPending);
  return ++ch.publish_seq;
}

void AmqpConnection::settle_confirm(Channel& ch, uint64_t seq, bool ok) {
  if (seq < ch.confirm_base || seq - ch.confirm_base >= ch.confirms.size()) return;
  ch.confirms[seq - ch.confirm_base] = ok ? Channel::Confirm::kAck : Channel::Confirm::kNack;
  if (ch.confirms_flush_queued) return;
  ch.confirms_flush_queued = true;
  reactor_.defer([reply = replier(ch)]() { reply([](AmqpConnection& c, Channel& chan) { c.flush_confirms(chan); }); });
}

void AmqpConnection::flush_confirms(Channel& ch) {
  ch.confirms_flush_queued = false;
  uint64_t acks = 0;  // consecutive acks through ch.confirm_base - 1
  auto send_acks = [&]() {
    if (acks == 0) return;
    Method m = Method::of(m::kBasicAck);
    m.set("delivery-tag", ch.confirm_base - 1).set("multiple", uint64_t{acks > 1 ? 1u : 0u});
    send_method(ch.id, m);
    acks = 0;
  };
  while (!ch.confirms.empty() && ch.confirms.front() != Channel::Confirm::kPending) {
    const bool ok = ch.confirms.front() == Channel::Confirm::kAck;
    ch.confirms.pop_front();
    if (!ok) {
      send_acks();
      Method m = Method::of(m::kBasicNack);
      m.set("delivery-tag", ch.confirm_base).set("multiple", uint64_t{0}).set("requeue", uint64_t{0});
      send_method(ch.id, m);
    }
    ++ch.confirm_base;
    if (ok) ++acks;
  }
  send_acks();
}

void AmqpConnection::publish_finished(uint16_t id, uint64_t serial, size_t bytes) {
  --publishes_in_flight_;
  held_.remove(bytes);
  if (Channel* ch = channel(id, serial); ch != nullptr && --ch->publishes_in_flight == 0) replay(id, serial);
  if (publishes_in_flight_ == 0 && close_after_publishes_) {
    close_after_publishes_ = false;
    send_method(0, Method::of(m::kConnectionCloseOk));
    return finish_close();
  }
  maybe_resume();
}

void AmqpConnection::unconfirmed_publish_failed(const std::string& exchange, const std::string& routing_key,
                                                const Status& why) {
  AmqpMetrics::get().unconfirmed_publish_failures.inc();
  ++failures_not_logged_;
  const auto now = std::chrono::steady_clock::now();
  if (last_failure_log_ && now - *last_failure_log_ < kFailureLogInterval) return;
  last_failure_log_ = now;
  MLOG_WARN("amqp client {}: a publish to exchange '{}' with routing key '{}' was not stored ({} without confirms "
            "since the last such warning): {}",
            conn_ != nullptr ? conn_->peer() : "", exchange, routing_key, failures_not_logged_, why.to_string());
  failures_not_logged_ = 0;
}

void AmqpConnection::maybe_resume() {
  if (!paused_ || !held_.open() || conn_ == nullptr) return;
  paused_ = false;
  if (throttle_.holding()) return;  // the throttle resumes
  conn_->resume_reading();
  if (input_ == nullptr || input_->empty()) return;
  reactor_.defer([link = std::weak_ptr<AmqpLink>(link_)]() {
    auto l = link.lock();
    if (!l || l->conn == nullptr) return;
    AmqpConnection& c = *l->conn;
    if (c.conn_ != nullptr && c.input_ != nullptr && !c.paused_) c.on_data(*c.conn_, *c.input_);
  });
}

uint64_t AmqpConnection::producer_for_all(const std::vector<broker::TopicName>& topics) {
  for (const auto& topic : topics) {
    if (producer_topics_.find(topic.local) == producer_topics_.end()) producer_topics_.emplace(topic.local, topic);
  }
  return producer_id_;
}

void AmqpConnection::charge_publish(const std::vector<broker::TopicName>& topics, int64_t bytes) {
  bool over = false;
  for (const auto& topic : topics) {
    auto it = publish_limits_.find(topic.local);
    if (it == publish_limits_.end()) it = publish_limits_.emplace(topic.local, service_.broker().publish_limits(topic)).first;
    over = throttle_.charge(*it->second, 1, bytes) || over;
  }
  if (over && conn_ != nullptr) conn_->pause_reading();
}

void AmqpConnection::on_writable_changed(runtime::Connection&, bool writable) {
  if (!writable) return;
  auto held = std::move(held_grants_);
  held_grants_.clear();
  for (auto& [consumer, n] : held) grant(consumer, n);
}

void AmqpConnection::on_close(runtime::Connection&, const Status&) {
  for (auto& [id, ch] : channels_) {
    if (!ch.closing) release_consumers(*this, ch);
  }
  channels_.clear();
  auto& broker = service_.broker();
  for (const auto& [name, topic] : producer_topics_) {
    broker.with_existing_topic(topic, false, [id = producer_id_](common::Result<broker::Topic*> t) {
      if (t.is_ok()) (*t)->remove_producer(id);
    });
  }
  producer_topics_.clear();
  publish_limits_.clear();
  throttle_.cancel();
  if (!exclusive_queues_.empty()) {
    delete_queues(service_, vhost_, {exclusive_queues_.begin(), exclusive_queues_.end()});
  }
  exclusive_queues_.clear();
  // Not destroyed here: this may run inside a timer's own callback.
  if (heartbeat_) heartbeat_->cancel();
  if (close_timer_) close_timer_->cancel();
  held_grants_.clear();
  conn_ = nullptr;
  input_ = nullptr;
  link_->conn = nullptr;
}

}  // namespace magnetar::protocol::amqp
