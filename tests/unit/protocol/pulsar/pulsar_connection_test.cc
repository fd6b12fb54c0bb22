// PulsarConnection's bounds on what one client has awaiting an answer, on a
// real broker over a real socket: SENDs pipelined far past
// max_pending_publishes (and past max_pending_publish_bytes) all get their
// receipt, in order, and requests pipelined past max_pending_requests all
// get their answer, while the connection stopped reading on the way (the
// pauses counter moved).
#include "protocol/pulsar/server/pulsar_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/metrics.h"
#include "utils/broker_fixture.h"

namespace magnetar::protocol::pulsar {
namespace {

constexpr int kPollMs = 30000;
constexpr char kTopic[] = "persistent://public/default/bounded";

uint64_t pauses() {
  return common::MetricsRegistry::global()
      .counter("magnetar_pulsar_connection_pauses_total",
               "Times a Pulsar connection stopped reading because its publishes or requests awaiting an answer "
               "reached their bound")
      .value();
}

// A blocking client socket reading whole frames; every read waits at most
// kPollMs.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }

  bool write_all(const std::string& bytes) {
    size_t at = 0;
    while (at < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }
  // The next frame that is not a PING (answered), or false on EOF, a
  // broken frame or a timeout.
  bool next(Frame* out) {
    while (true) {
      switch (decoder_.decode(input_, out)) {
        case DecodeResult::kFrame:
          if (out->command.type() == proto::BaseCommand::PING) {
            proto::BaseCommand pong;
            pong.set_type(proto::BaseCommand::PONG);
            pong.mutable_pong();
            if (!write_all(std::string(encode_command(pong).view()))) return false;
            continue;
          }
          return true;
        case DecodeResult::kNeedMore:
          break;
        default:
          return false;
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, kPollMs) <= 0) return false;
      common::Slice buf = common::Slice::allocate(64 << 10);
      ssize_t got = ::recv(fd_, buf.mutable_data(), buf.size(), 0);
      if (got <= 0) return false;
      input_.append(buf.sub(0, static_cast<size_t>(got)));
    }
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  FrameDecoder decoder_;
  common::SliceChain input_;
};

std::string frame(const proto::BaseCommand& cmd) { return std::string(encode_command(cmd).view()); }

std::string connect_frame() {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::CONNECT);
  cmd.mutable_connect()->set_client_version("bound-test");
  cmd.mutable_connect()->set_protocol_version(19);
  return frame(cmd);
}

std::string producer_frame(uint64_t producer_id, uint64_t request_id) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::PRODUCER);
  cmd.mutable_producer()->set_topic(kTopic);
  cmd.mutable_producer()->set_producer_id(producer_id);
  cmd.mutable_producer()->set_request_id(request_id);
  return frame(cmd);
}

std::string send_frame(uint64_t producer_id, uint64_t sequence_id, const std::string& payload) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::SEND);
  cmd.mutable_send()->set_producer_id(producer_id);
  cmd.mutable_send()->set_sequence_id(sequence_id);
  cmd.mutable_send()->set_num_messages(1);
  proto::MessageMetadata md;
  md.set_producer_name("bound-test");
  md.set_sequence_id(sequence_id);
  md.set_publish_time(1700000000000);
  return std::string(encode_payload_command(cmd, md, payload).view());
}

std::string partitioned_metadata_frame(uint64_t request_id) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::PARTITIONED_METADATA);
  cmd.mutable_partitionmetadata()->set_topic(kTopic);
  cmd.mutable_partitionmetadata()->set_request_id(request_id);
  return frame(cmd);
}

std::string subscribe_frame(uint64_t consumer_id, uint64_t request_id) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::SUBSCRIBE);
  auto* sub = cmd.mutable_subscribe();
  sub->set_topic(kTopic);
  sub->set_subscription("windowed");
  sub->set_subtype(proto::CommandSubscribe::Exclusive);
  sub->set_consumer_id(consumer_id);
  sub->set_request_id(request_id);
  sub->set_initialposition(proto::CommandSubscribe::Earliest);
  return frame(cmd);
}

std::string flow_frame(uint64_t consumer_id, uint32_t permits) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::FLOW);
  cmd.mutable_flow()->set_consumer_id(consumer_id);
  cmd.mutable_flow()->set_messagepermits(permits);
  return frame(cmd);
}

std::string consumer_stats_frame(uint64_t consumer_id, uint64_t request_id) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::CONSUMER_STATS);
  cmd.mutable_consumerstats()->set_consumer_id(consumer_id);
  cmd.mutable_consumerstats()->set_request_id(request_id);
  return frame(cmd);
}

class PulsarConnectionTest : public broker::BrokerFixture {
 protected:
  void start_service(PulsarServiceOptions options) {
    options.port = 0;
    options.keepalive = std::chrono::seconds(0);
    service_ = std::make_unique<PulsarService>(*runtime_, *broker_, *store_, options);
    ASSERT_TRUE(service_->start().is_ok());
    client_ = std::make_unique<Client>(service_->port());
    ASSERT_TRUE(client_->ok());
    ASSERT_TRUE(client_->write_all(connect_frame()));
    Frame f;
    ASSERT_TRUE(client_->next(&f));
    ASSERT_EQ(f.command.type(), proto::BaseCommand::CONNECTED);
  }
  void TearDown() override {
    client_.reset();
    if (service_) service_->stop();
    BrokerFixture::TearDown();
  }

  // Pipelines `n` SENDs of `payload` in one write, then checks that every
  // one got its receipt, in order.
  void pipeline_sends(int n, const std::string& payload) {
    ASSERT_TRUE(client_->write_all(producer_frame(1, 1)));
    Frame f;
    ASSERT_TRUE(client_->next(&f));
    ASSERT_EQ(f.command.type(), proto::BaseCommand::PRODUCER_SUCCESS);
    std::string all;
    for (int k = 0; k < n; ++k) all += send_frame(1, static_cast<uint64_t>(k), payload);
    ASSERT_TRUE(client_->write_all(all));
    for (int k = 0; k < n; ++k) {
      ASSERT_TRUE(client_->next(&f)) << "no answer to SEND " << k << " of " << n;
      ASSERT_EQ(f.command.type(), proto::BaseCommand::SEND_RECEIPT) << "SEND " << k;
      ASSERT_EQ(f.command.send_receipt().sequence_id(), static_cast<uint64_t>(k));
    }
  }

  std::unique_ptr<PulsarService> service_;
  std::unique_ptr<Client> client_;
};

TEST_F(PulsarConnectionTest, SendsPastTheCountBoundAllGetTheirReceiptInOrder) {
  PulsarServiceOptions options;
  options.max_pending_publishes = 4;
  start_service(options);
  const uint64_t before = pauses();
  pipeline_sends(300, "m");
  EXPECT_GT(pauses(), before);
}

TEST_F(PulsarConnectionTest, SendsPastTheBytesBoundAllGetTheirReceiptInOrder) {
  PulsarServiceOptions options;
  options.max_pending_publish_bytes = 8192;
  start_service(options);
  const uint64_t before = pauses();
  pipeline_sends(100, std::string(3000, 'x'));
  EXPECT_GT(pauses(), before);
}

TEST_F(PulsarConnectionTest, RequestsPastTheirBoundAreAllAnswered) {
  PulsarServiceOptions options;
  options.max_pending_requests = 2;
  start_service(options);
  const uint64_t before = pauses();
  constexpr uint64_t kRequests = 200;
  std::string all;
  for (uint64_t id = 1; id <= kRequests; ++id) all += partitioned_metadata_frame(id);
  ASSERT_TRUE(client_->write_all(all));
  std::set<uint64_t> answered;
  Frame f;
  for (uint64_t k = 0; k < kRequests; ++k) {
    ASSERT_TRUE(client_->next(&f)) << "answers so far: " << answered.size();
    ASSERT_EQ(f.command.type(), proto::BaseCommand::PARTITIONED_METADATA_RESPONSE);
    answered.insert(f.command.partitionmetadataresponse().request_id());
  }
  EXPECT_EQ(answered.size(), kRequests);
  EXPECT_GT(pauses(), before);
}

// A delivery credit of a few messages is given back as deliveries reach
// the connection: every message arrives once, in order, and the broker
// holds exactly the permits the client granted less those it used.
TEST_F(PulsarConnectionTest, TheDeliveryCreditIsGivenBackAsMessagesGo) {
  PulsarServiceOptions options;
  options.consumer_credit_bytes = 2048;  // about seven messages
  start_service(options);
  constexpr int kMessages = 300;
  pipeline_sends(kMessages, "m");
  ASSERT_TRUE(client_->write_all(subscribe_frame(1, 2)));
  Frame f;
  ASSERT_TRUE(client_->next(&f));
  ASSERT_EQ(f.command.type(), proto::BaseCommand::SUCCESS);
  ASSERT_TRUE(client_->write_all(flow_frame(1, 1000)));
  std::pair<uint64_t, int64_t> previous{0, -1};
  for (int k = 0; k < kMessages; ++k) {
    ASSERT_TRUE(client_->next(&f)) << "message " << k;
    ASSERT_EQ(f.command.type(), proto::BaseCommand::MESSAGE) << "message " << k;
    const auto& id = f.command.message().message_id();
    std::pair<uint64_t, int64_t> position{id.ledgerid(), static_cast<int64_t>(id.entryid())};
    ASSERT_GT(position, previous) << "message " << k;
    previous = position;
  }
  ASSERT_TRUE(client_->write_all(consumer_stats_frame(1, 3)));
  ASSERT_TRUE(client_->next(&f));
  ASSERT_EQ(f.command.type(), proto::BaseCommand::CONSUMER_STATS_RESPONSE);
  EXPECT_EQ(f.command.consumerstatsresponse().availablepermits(), 1000u - kMessages);
}

}  // namespace
}  // namespace magnetar::protocol::pulsar
