// KafkaConnection's bound on requests awaiting their responses, on a real
// broker over a real socket: a client that pipelines far more Produce
// requests than the bound before reading anything gets every response, in
// request order, while the connection stopped reading on the way (the
// pauses counter moved), and one request larger than the bytes bound is
// still served.
#include "protocol/kafka/server/kafka_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/metrics.h"
#include "protocol/kafka/record_batch.h"
#include "utils/broker_fixture.h"

namespace magnetar::protocol::kafka {
namespace {

constexpr int kPollMs = 30000;

// A blocking client socket; every read waits at most kPollMs.
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
  // Exactly `n` bytes, or "" on EOF, error or timeout.
  std::string read_exact(size_t n) {
    std::string out(n, '\0');
    size_t at = 0;
    while (at < n) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, kPollMs) <= 0) return {};
      ssize_t got = ::recv(fd_, out.data() + at, n - at, 0);
      if (got <= 0) return {};
      at += static_cast<size_t>(got);
    }
    return out;
  }
  // One whole response (without its size prefix), or "".
  std::string read_response() {
    std::string prefix = read_exact(4);
    if (prefix.size() != 4) return {};
    WireReader r(common::Slice::copy_of(prefix));
    return read_exact(static_cast<size_t>(r.i32()));
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

// Idempotence fields of a record batch (none by default).
struct Sequencing {
  int64_t producer_id = -1;
  int16_t epoch = -1;
  int32_t base_sequence = -1;
};

// A Produce v8 request (acks=1) of `count` records `value` to partition 0 of `topic`.
std::string produce_request(int32_t correlation_id, const std::string& topic, const std::string& value,
                            Sequencing seq = {}, int count = 1) {
  constexpr int16_t kVersion = 8;
  const ApiSpec* api = find_api(kProduce);
  RecordBatch batch;
  batch.producer_id = seq.producer_id;
  batch.producer_epoch = seq.epoch;
  batch.base_sequence = seq.base_sequence;
  for (int k = 0; k < count; ++k) {
    Record record;
    record.offset_delta = k;
    record.value = common::Slice::copy_of(value);
    batch.records.push_back(std::move(record));
  }
  WireWriter records;
  write_record_batch(records, batch);
  Struct body(*api->request);
  body.set_null("TransactionalId");
  body.set("Acks", int64_t{1});
  body.set("TimeoutMs", int64_t{30000});
  auto& t = body.add("Topics");
  t.set("Name", topic);
  auto& p = t.add("Partitions");
  p.set("PartitionIndex", int64_t{0});
  p.set("Records", records.finish());
  WireWriter out;
  begin_request(out, RequestHeader{kProduce, kVersion, correlation_id, std::string("bound-test")},
                api->request_header_version(kVersion));
  encode_struct(out, body, kVersion, api->flexible(kVersion));
  out.patch_i32(0, static_cast<int32_t>(out.size() - kSizePrefixBytes));
  common::Slice msg = out.finish();
  return std::string(msg.view());
}

struct ProduceAnswer {
  int32_t correlation_id = -1;
  int64_t error = -1;
  int64_t base_offset = -1;
};

ProduceAnswer parse_produce_response(const std::string& bytes) {
  constexpr int16_t kVersion = 8;
  const ApiSpec* api = find_api(kProduce);
  WireReader r(common::Slice::copy_of(bytes));
  ProduceAnswer a;
  a.correlation_id = r.i32();
  Struct resp = decode_struct(r, *api->response, kVersion, api->flexible(kVersion));
  if (!r.ok() || resp.array("Responses").empty()) return a;
  const Struct& p = resp.array("Responses")[0].array("Partitions")[0];
  a.error = p.i("ErrorCode");
  a.base_offset = p.i("BaseOffset");
  return a;
}

uint64_t pauses() {
  return common::MetricsRegistry::global()
      .counter("magnetar_kafka_connection_pauses_total",
               "Times a Kafka connection stopped reading because its requests awaiting responses reached their bound")
      .value();
}

class KafkaConnectionTest : public broker::BrokerFixture {
 protected:
  void start_service(KafkaServiceOptions options) {
    options.port = 0;
    service_ = std::make_unique<KafkaService>(*runtime_, *broker_, options);
    ASSERT_TRUE(service_->start().is_ok());
  }
  void TearDown() override {
    if (service_) service_->stop();
    BrokerFixture::TearDown();
  }

  // Pipelines `n` Produce requests of `value` to `topic` in one write, then
  // reads every response and checks they came back in order, stored one
  // after the other.
  void pipeline_and_check(const std::string& topic, int n, const std::string& value) {
    Client client(service_->port());
    ASSERT_TRUE(client.ok());
    std::string all;
    for (int k = 1; k <= n; ++k) all += produce_request(k, topic, value);
    ASSERT_TRUE(client.write_all(all));
    for (int k = 1; k <= n; ++k) {
      std::string bytes = client.read_response();
      ASSERT_FALSE(bytes.empty()) << "no response " << k << " of " << n;
      ProduceAnswer a = parse_produce_response(bytes);
      ASSERT_EQ(a.correlation_id, k);
      ASSERT_EQ(a.error, 0) << "response " << k;
      ASSERT_EQ(a.base_offset, k - 1);
    }
  }

  std::unique_ptr<KafkaService> service_;
};

TEST_F(KafkaConnectionTest, PipelinedRequestsPastTheCountBoundAreAllAnsweredInOrder) {
  KafkaServiceOptions options;
  options.max_inflight_requests = 4;
  start_service(options);
  const uint64_t before = pauses();
  pipeline_and_check("bounded-count", 300, "v");
  EXPECT_GT(pauses(), before);
}

TEST_F(KafkaConnectionTest, PipelinedRequestsPastTheBytesBoundAreAllAnsweredInOrder) {
  KafkaServiceOptions options;
  options.max_inflight_bytes = 4096;
  start_service(options);
  const uint64_t before = pauses();
  pipeline_and_check("bounded-bytes", 100, std::string(1500, 'x'));
  EXPECT_GT(pauses(), before);
}

// Every entry rolls the ledger over, so the Produce requests pipelined
// behind one wait in the log for the next ledger: each is still answered
// with the offset its records were stored at.
class KafkaProduceOffsetsTest : public KafkaConnectionTest {
 protected:
  void SetUp() override {
    broker_options_.managed_ledger.max_entries_per_ledger = 1;
    KafkaConnectionTest::SetUp();
  }
};

TEST_F(KafkaProduceOffsetsTest, BaseOffsetsAreWhereTheRecordsWereStoredWhileTheLedgerRollsOver) {
  start_service(KafkaServiceOptions{});
  constexpr int kRequests = 30;
  Client client(service_->port());
  ASSERT_TRUE(client.ok());
  std::string all;
  for (int k = 1; k <= kRequests; ++k) all += produce_request(k, "rolling", "v", {}, 2);
  ASSERT_TRUE(client.write_all(all));
  for (int k = 1; k <= kRequests; ++k) {
    ProduceAnswer a = parse_produce_response(client.read_response());
    ASSERT_EQ(a.correlation_id, k);
    ASSERT_EQ(a.error, 0) << "response " << k;
    EXPECT_EQ(a.base_offset, 2 * (k - 1)) << "response " << k;
  }
}

TEST_F(KafkaProduceOffsetsTest, ARetriedIdempotentBatchIsAnsweredWithTheOffsetItWasStoredAt) {
  start_service(KafkaServiceOptions{});
  constexpr int kBatches = 5;  // the window an idempotent producer keeps in flight
  constexpr int64_t kProducerId = 4242;
  Client client(service_->port());
  ASSERT_TRUE(client.ok());
  std::string all;
  for (int k = 0; k < kBatches; ++k) {
    all += produce_request(k + 1, "rolling-idempotent", "v", Sequencing{kProducerId, 0, 2 * k}, 2);
  }
  ASSERT_TRUE(client.write_all(all));
  for (int k = 0; k < kBatches; ++k) {
    ProduceAnswer a = parse_produce_response(client.read_response());
    ASSERT_EQ(a.correlation_id, k + 1);
    ASSERT_EQ(a.error, 0) << "batch " << k;
    EXPECT_EQ(a.base_offset, 2 * k) << "batch " << k;
  }
  // Retries of every batch: duplicates, answered with where each is stored.
  all.clear();
  for (int k = 0; k < kBatches; ++k) {
    all += produce_request(100 + k, "rolling-idempotent", "v", Sequencing{kProducerId, 0, 2 * k}, 2);
  }
  ASSERT_TRUE(client.write_all(all));
  for (int k = 0; k < kBatches; ++k) {
    ProduceAnswer a = parse_produce_response(client.read_response());
    ASSERT_EQ(a.correlation_id, 100 + k);
    ASSERT_EQ(a.error, 0) << "retry of batch " << k;
    EXPECT_EQ(a.base_offset, 2 * k) << "retry of batch " << k;
  }
}

TEST_F(KafkaConnectionTest, ARequestLargerThanTheBytesBoundIsServedAlone) {
  KafkaServiceOptions options;
  options.max_inflight_bytes = 1024;
  start_service(options);
  pipeline_and_check("oversized", 3, std::string(64 << 10, 'y'));
}

}  // namespace
}  // namespace magnetar::protocol::kafka
