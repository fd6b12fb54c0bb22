#include "georep/remote_link.h"

#include "common/clock.h"
#include "common/logging.h"
#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::georep {

namespace pp = protocol::pulsar;
using common::Status;

namespace {
constexpr uint64_t kLinkProducerId = 1;
constexpr uint64_t kLinkProducerRequest = 1;
}  // namespace

RemoteLink::RemoteLink(LinkListener* listener, std::string topic, std::string producer_name, std::string token)
    : listener_(listener), topic_(std::move(topic)), producer_name_(std::move(producer_name)),
      token_(std::move(token)) {}

void RemoteLink::on_open(runtime::Connection& conn) {
  conn_ = &conn;
  last_heard_ms_ = common::monotonic_ms();
  pp::proto::BaseCommand cmd;
  cmd.set_type(pp::proto::BaseCommand::CONNECT);
  auto* connect = cmd.mutable_connect();
  connect->set_client_version("magnetar-geo-replicator");
  connect->set_protocol_version(pp::commands::kMaxProtocolVersion);
  if (!token_.empty()) {
    connect->set_auth_method_name("token");
    connect->set_auth_data(token_);
  }
  conn.write(pp::encode_command(cmd));
}

void RemoteLink::on_data(runtime::Connection& conn, common::SliceChain& input) {
  if (decoder_broken_) return;
  pp::Frame frame;
  while (!failed_) {
    pp::DecodeResult r = decoder_.decode(input, &frame);
    if (r == pp::DecodeResult::kNeedMore) return;
    last_heard_ms_ = common::monotonic_ms();
    if (r != pp::DecodeResult::kFrame) {
      decoder_broken_ = r == pp::DecodeResult::kStreamError;
      fail(Status::corruption("the remote cluster sent a frame that cannot be read: " + decoder_.status().message()));
      return;
    }
    const auto& c = frame.command;
    switch (c.type()) {
      case pp::proto::BaseCommand::CONNECTED: {
        pp::proto::BaseCommand cmd;
        cmd.set_type(pp::proto::BaseCommand::PRODUCER);
        auto* p = cmd.mutable_producer();
        p->set_topic(topic_);
        p->set_producer_id(kLinkProducerId);
        p->set_request_id(kLinkProducerRequest);
        p->set_producer_name(producer_name_);
        p->set_user_provided_producer_name(true);
        conn.write(pp::encode_command(cmd));
        break;
      }
      case pp::proto::BaseCommand::PRODUCER_SUCCESS:
        if (c.producer_success().has_producer_ready() && !c.producer_success().producer_ready()) break;
        ready_ = true;
        if (listener_ != nullptr) listener_->link_ready();
        break;
      case pp::proto::BaseCommand::SEND_RECEIPT:
        if (listener_ != nullptr) listener_->link_receipt(c.send_receipt().sequence_id());
        break;
      case pp::proto::BaseCommand::SEND_ERROR:
        fail(Status::unavailable("the remote cluster refused message " +
                                 std::to_string(c.send_error().sequence_id()) + ": " + c.send_error().message()));
        return;
      case pp::proto::BaseCommand::ERROR:
        fail(Status::unavailable("the remote cluster refused the replicator: " + c.error().message()));
        return;
      case pp::proto::BaseCommand::CLOSE_PRODUCER:
        fail(Status::unavailable("the remote cluster closed the replicator's producer"));
        return;
      case pp::proto::BaseCommand::PING:
        conn.write(pp::encode_command(pp::commands::pong()));
        break;
      default:
        break;  // PONG and anything a producer need not act on
    }
  }
}

void RemoteLink::send(uint64_t sequence_id, uint64_t highest_sequence_id, int32_t messages,
                      const common::Slice& entry) {
  if (conn_ == nullptr || failed_) return;
  pp::proto::BaseCommand cmd;
  cmd.set_type(pp::proto::BaseCommand::SEND);
  auto* s = cmd.mutable_send();
  s->set_producer_id(kLinkProducerId);
  s->set_sequence_id(sequence_id);
  s->set_num_messages(messages);
  s->set_highest_sequence_id(highest_sequence_id);
  conn_->write(pp::encode_payload_head(cmd, entry.size()));
  conn_->write(entry);
}

void RemoteLink::ping() {
  if (conn_ != nullptr && !failed_) conn_->write(pp::encode_command(pp::commands::ping()));
}

void RemoteLink::detach() {
  listener_ = nullptr;
  if (conn_ != nullptr && !failed_) {
    failed_ = true;
    conn_->close();
  }
}

void RemoteLink::fail(const Status& why) {
  if (failed_) return;
  failed_ = true;
  ready_ = false;
  LinkListener* l = listener_;
  listener_ = nullptr;
  if (conn_ != nullptr) conn_->close(why);
  if (l != nullptr) l->link_failed(why);
}

void RemoteLink::on_close(runtime::Connection&, const Status& reason) {
  conn_ = nullptr;
  fail(reason.is_ok() ? Status::unavailable("the remote cluster closed the connection")
                      : Status::unavailable("connection to the remote cluster lost: " + reason.message()));
}

}  // namespace magnetar::georep
