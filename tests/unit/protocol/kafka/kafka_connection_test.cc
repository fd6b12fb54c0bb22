// KafkaConnection's bound on requests awaiting their responses, on a real
// broker over a real socket: a client that pipelines far more Produce
// requests than the bound before reading anything gets every response, in
// request order, while the connection stopped reading on the way (the
// pauses counter moved), and one request larger than the bytes bound is
// still served. Metadata while the metadata store does not answer: the
// requests that come while a listing waits share it, and a request is
// answered from the last complete listing once its patience runs out.
#include "protocol/kafka/server/kafka_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "broker/tenancy.h"
#include "common/metrics.h"
#include "protocol/kafka/record_batch.h"
#include "utils/broker_fixture.h"
#include "utils/forwarding_store.h"

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
  // Whether the server closed the connection within `ms` (data comes
  // first: false).
  bool closed_within(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK) <= 0;
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

// The metadata store, but list_children calls wait while held (as reads do
// while a cluster has no metadata leader) until released.
class HeldStore final : public test_util::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  void hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void release() {
    std::vector<std::function<void()>> waiting;
    {
      std::lock_guard lock(mu_);
      held_ = false;
      waiting.swap(waiting_);
    }
    for (auto& fn : waiting) fn();
  }
  size_t lists() const {
    std::lock_guard lock(mu_);
    return lists_;
  }
  size_t waiting() const {
    std::lock_guard lock(mu_);
    return waiting_.size();
  }

  void list_children(std::string key,
                     metadata::Callback<common::Result<std::vector<std::string>>> done) override {
    auto fn = [this, key = std::move(key), done = std::move(done)]() mutable {
      inner_.list_children(std::move(key), std::move(done));
    };
    {
      std::lock_guard lock(mu_);
      ++lists_;
      if (held_) {
        waiting_.push_back(std::move(fn));
        return;
      }
    }
    fn();
  }

 private:
  mutable std::mutex mu_;
  bool held_ = false;
  size_t lists_ = 0;
  std::vector<std::function<void()>> waiting_;
};

// A request of `api_key` at `version`, its body set by `fill`.
std::string request_of(int16_t api_key, int16_t version, int32_t correlation_id,
                       const std::function<void(Struct&)>& fill) {
  const ApiSpec* api = find_api(api_key);
  Struct body(*api->request);
  fill(body);
  WireWriter out;
  begin_request(out, RequestHeader{api_key, version, correlation_id, std::string("metadata-test")},
                api->request_header_version(version));
  encode_struct(out, body, version, api->flexible(version));
  out.patch_i32(0, static_cast<int32_t>(out.size() - kSizePrefixBytes));
  return std::string(out.finish().view());
}

// A Metadata v4 request for `topics` (none: every topic), never creating one.
std::string metadata_request(int32_t correlation_id, const std::vector<std::string>& topics, bool all = false) {
  return request_of(kMetadata, 4, correlation_id, [&](Struct& body) {
    if (all) {
      body.set_null("Topics");
    } else {
      for (const auto& name : topics) body.add("Topics").set("Name", name);
    }
    body.set("AllowAutoTopicCreation", int64_t{0});
  });
}

// The response to `api_key` at `version` in `bytes`; none when there was none.
std::optional<Struct> response_of(const std::string& bytes, int16_t api_key, int16_t version) {
  if (bytes.empty()) return std::nullopt;
  const ApiSpec* api = find_api(api_key);
  WireReader r(common::Slice::copy_of(bytes));
  r.i32();  // correlation id
  return decode_struct(r, *api->response, version, api->flexible(version));
}

// Topic name -> (error code, partitions) of a Metadata v4 response; empty
// when there was none.
std::map<std::string, std::pair<int64_t, size_t>> parse_metadata_response(const std::string& bytes) {
  std::map<std::string, std::pair<int64_t, size_t>> out;
  auto resp = response_of(bytes, kMetadata, 4);
  if (!resp) return out;
  for (const auto& t : resp->array("Topics")) out[t.str("Name")] = {t.i("ErrorCode"), t.array("Partitions").size()};
  return out;
}

// `topic` in a Metadata response (v4); none when it is not there.
std::optional<Struct> metadata_topic(const std::string& bytes, const std::string& topic) {
  auto resp = response_of(bytes, kMetadata, 4);
  if (!resp) return std::nullopt;
  for (const auto& t : resp->array("Topics")) {
    if (t.str("Name") == topic) return t;
  }
  return std::nullopt;
}

// Each partition of `topic` in a Metadata response: its error and leader.
std::vector<std::pair<int64_t, int64_t>> partition_leaders(const std::string& bytes, const std::string& topic) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (auto t = metadata_topic(bytes, topic)) {
    for (const auto& p : t->array("Partitions")) out.emplace_back(p.i("ErrorCode"), p.i("LeaderId"));
  }
  return out;
}

// The ErrorCode of `topic` in a Metadata response; -100 when it is not there.
int64_t topic_error_of(const std::string& bytes, const std::string& topic) {
  auto t = metadata_topic(bytes, topic);
  return t ? t->i("ErrorCode") : -100;
}

// The ErrorCode of a response to `api_key` at `version`; -100 when there was none.
int64_t error_of(const std::string& bytes, int16_t api_key, int16_t version) {
  auto resp = response_of(bytes, api_key, version);
  return resp ? resp->i("ErrorCode") : -100;
}

// A cluster member that owns every bundle itself, with a lease that can lapse.
class SelfOwnership final : public broker::Ownership {
 public:
  explicit SelfOwnership(int32_t broker_id) {
    self_.node = 7;
    self_.broker_id = broker_id;
    self_.here = true;
  }
  void owner_of(const broker::TopicName& topic, OwnerCallback done) override {
    if (undecided_.count(topic.to_string()) > 0) {
      std::lock_guard lock(mu_);
      deciding_.push_back(std::move(done));
      return;
    }
    done(*known_owner(topic));
  }
  std::optional<broker::NodeEndpoints> known_owner(const broker::TopicName& topic) const override {
    if (undecided_.count(topic.to_string()) > 0) return std::nullopt;
    auto it = elsewhere_.find(topic.to_string());
    return it == elsewhere_.end() ? self_ : it->second;
  }
  // Answers the owner_of calls for undecided_ topics: this node.
  void decide() {
    std::vector<OwnerCallback> waiting;
    {
      std::lock_guard lock(mu_);
      waiting.swap(deciding_);
    }
    for (auto& done : waiting) done(self_);
  }
  bool lease_current() const override { return lease_; }
  std::vector<broker::NodeEndpoints> live_nodes() const override { return {self_}; }
  broker::NodeEndpoints self() const override { return self_; }
  std::vector<std::string> bundles_of(uint64_t) const override { return {}; }
  bool releasing(const broker::TopicName&) const override { return false; }
  void unload(const std::string&, uint64_t, std::function<void(common::Status)> done) override {
    done(common::Status::ok());
  }
  std::vector<broker::BundleOwner> bundles_in(const broker::NamespaceName&) const override { return {}; }
  void split(const std::string&, std::vector<uint32_t>, bool, std::function<void(common::Status)> done) override {
    done(common::Status::ok());
  }
  std::atomic<bool> lease_{true};
  // Topics owned by a node that is not alive ("persistent://..." -> owner); set before the requests.
  std::map<std::string, broker::NodeEndpoints> elsewhere_;
  // Topics whose owner_of waits until decide(); set before the requests.
  std::set<std::string> undecided_;

 private:
  broker::NodeEndpoints self_;
  std::mutex mu_;
  std::vector<OwnerCallback> deciding_;
};

class KafkaMetadataTest : public KafkaConnectionTest {
 protected:
  void SetUp() override {
    KafkaConnectionTest::SetUp();
    held_ = std::make_unique<HeldStore>(*store_);
    tenancy_ = std::make_unique<broker::Tenancy>(*held_, broker::BootstrapDefaults{});
    ASSERT_TRUE(tenancy_->start().is_ok());
    auto kept = broker::TopicName::parse("persistent://public/default/kept");
    ASSERT_TRUE(kept.is_ok());
    ASSERT_TRUE(tenancy_->create_partitioned_topic(*kept, 2).is_ok());
  }
  void TearDown() override {
    held_->release();
    if (service_) service_->stop();
    // The tenancy thread may still be listing for the service: drained
    // first, as a node stops every component before it frees any.
    tenancy_->stop();
    service_.reset();
    KafkaConnectionTest::TearDown();
  }
  void start_with_tenancy(KafkaServiceOptions options) {
    options.port = 0;
    service_ = std::make_unique<KafkaService>(*runtime_, *broker_, options);
    service_->set_metadata(tenancy_.get(), nullptr);
    ASSERT_TRUE(service_->start().is_ok());
  }
  // Starts the service as the cluster member `ownership` describes (its
  // broker id the node id); stop_member() before `ownership` goes.
  void start_member(SelfOwnership& ownership, KafkaServiceOptions options = {}) {
    options.node_id = ownership.self().broker_id;
    broker_->set_ownership(&ownership);
    start_with_tenancy(options);
  }
  void stop_member() {
    service_->stop();
    tenancy_->stop();  // its listings for the service drained (TearDown)
    service_.reset();
    broker_->set_ownership(nullptr);
  }
  // Lists public/default through the service and waits for the answer.
  std::shared_ptr<const TopicListing> list() {
    std::mutex mu;
    std::condition_variable cv;
    std::shared_ptr<const TopicListing> got;
    service_->list_topics(*broker::NamespaceName::parse("public/default"), [&](auto listing) {
      std::lock_guard lock(mu);
      got = std::move(listing);
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return got != nullptr; });
    return got;
  }

  std::unique_ptr<HeldStore> held_;
  std::unique_ptr<broker::Tenancy> tenancy_;
};

TEST_F(KafkaMetadataTest, ListingsThatComeWhileOneWaitsToStartShareIt) {
  start_with_tenancy(KafkaServiceOptions{});
  const size_t before = held_->lists();
  auto alone = list();
  ASSERT_NE(alone, nullptr);
  EXPECT_TRUE(alone->complete);
  EXPECT_EQ(alone->topics.count("kept"), 1U);
  const size_t per_listing = held_->lists() - before;
  ASSERT_GT(per_listing, 0U);

  // One listing held inside the store; twenty requests after it.
  held_->hold();
  const auto ns = *broker::NamespaceName::parse("public/default");
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0;
  auto count = [&](std::shared_ptr<const TopicListing> listing) {
    std::lock_guard lock(mu);
    if (listing->complete && listing->topics.count("kept") == 1) ++answered;
    cv.notify_all();
  };
  const size_t held_from = held_->lists();
  service_->list_topics(ns, count);
  for (int i = 0; i < 200 && held_->waiting() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(held_->waiting(), 1U) << "the first listing reached the store";
  for (int i = 0; i < 20; ++i) service_->list_topics(ns, count);
  held_->release();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered == 21; })) << answered;
  }
  // Whatever else was queued on the tenancy thread has run by now.
  std::promise<void> drained;
  ASSERT_TRUE(tenancy_->submit([&drained] { drained.set_value(); }).is_ok());
  ASSERT_EQ(drained.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  // The held one, and one more for all twenty.
  EXPECT_EQ(held_->lists() - held_from, 2 * per_listing);
}

TEST_F(KafkaMetadataTest, PastItsPatienceMetadataIsAnsweredFromTheLastCompleteListing) {
  KafkaServiceOptions options;
  options.metadata_patience = std::chrono::milliseconds(300);
  start_with_tenancy(options);
  Client client(service_->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.write_all(metadata_request(1, {"kept", "missing"})));
  auto read = parse_metadata_response(client.read_response());
  ASSERT_EQ(read.size(), 2U);
  EXPECT_EQ(read["kept"], std::make_pair(int64_t{kNone}, size_t{2}));
  EXPECT_EQ(read["missing"].first, kUnknownTopicOrPartition);  // listed: it does not exist

  // The store answers no list: the patience answers from what was read.
  held_->hold();
  ASSERT_TRUE(client.write_all(metadata_request(2, {"kept", "missing"})));
  auto late = parse_metadata_response(client.read_response());
  ASSERT_EQ(late.size(), 2U) << "no answer while the store is held";
  EXPECT_EQ(late["kept"], std::make_pair(int64_t{kNone}, size_t{2}));
  EXPECT_EQ(late["missing"].first, kLeaderNotAvailable);  // it may exist: retriable, not unknown
  ASSERT_TRUE(client.write_all(metadata_request(3, {}, true)));
  auto all = parse_metadata_response(client.read_response());
  EXPECT_EQ(all.count("kept"), 1U);

  // Once the store answers again, so does the listing.
  held_->release();
  ASSERT_TRUE(client.write_all(metadata_request(4, {"kept", "missing"})));
  auto again = parse_metadata_response(client.read_response());
  ASSERT_EQ(again.size(), 2U);
  EXPECT_EQ(again["missing"].first, kUnknownTopicOrPartition);
}

// Cut off from the members, a node's lease lapses and what it owned is
// taken over: its Metadata must not keep clients producing to it, whether
// it asked for the owners or answered past its patience.
TEST_F(KafkaMetadataTest, AMemberWhoseLeaseLapsedNamesNoLeaderForWhatItOwned) {
  KafkaServiceOptions options;
  options.metadata_patience = std::chrono::milliseconds(300);
  SelfOwnership ownership(3);
  start_member(ownership, options);
  Client client(service_->port());
  ASSERT_TRUE(client.ok());
  const std::vector<std::pair<int64_t, int64_t>> led(2, {kNone, 3});
  ASSERT_TRUE(client.write_all(metadata_request(1, {"kept"})));
  EXPECT_EQ(partition_leaders(client.read_response(), "kept"), led);

  // No partition led: the topic as a whole is not available.
  ownership.lease_ = false;
  ASSERT_TRUE(client.write_all(metadata_request(2, {"kept"})));
  EXPECT_EQ(topic_error_of(client.read_response(), "kept"), kLeaderNotAvailable) << "asked for the owners";
  held_->hold();
  ASSERT_TRUE(client.write_all(metadata_request(3, {"kept"})));
  EXPECT_EQ(topic_error_of(client.read_response(), "kept"), kLeaderNotAvailable) << "past its patience";
  ownership.lease_ = true;
  ASSERT_TRUE(client.write_all(metadata_request(4, {"kept"})));
  EXPECT_EQ(partition_leaders(client.read_response(), "kept"), led) << "past its patience, lease current";
  held_->release();
  stop_member();
}

// A partition whose owner is not among the brokers listed has no leader a
// client can reach; a topic with no partition led is not available as a
// whole (a client caches a partition without a leader and librdkafka's
// offset queries call it unknown without asking again), while one with
// some partitions led names the others' leaders as none.
TEST_F(KafkaMetadataTest, ATopicWithNoPartitionLedIsNotAvailableAsAWhole) {
  SelfOwnership ownership(3);
  broker::NodeEndpoints gone;
  gone.node = 8;
  gone.broker_id = 5;
  auto kept = broker::TopicName::parse("persistent://public/default/kept");
  ASSERT_TRUE(kept.is_ok());
  ownership.elsewhere_[kept->partition_of(1).to_string()] = gone;
  start_member(ownership);
  Client client(service_->port());
  ASSERT_TRUE(client.ok());
  const std::vector<std::pair<int64_t, int64_t>> one_led{{kNone, 3}, {kLeaderNotAvailable, -1}};
  ASSERT_TRUE(client.write_all(metadata_request(1, {"kept"})));
  std::string answer = client.read_response();
  EXPECT_EQ(topic_error_of(answer, "kept"), kNone);
  EXPECT_EQ(partition_leaders(answer, "kept"), one_led);

  ownership.elsewhere_[kept->partition_of(0).to_string()] = gone;
  ASSERT_TRUE(client.write_all(metadata_request(2, {"kept"})));
  answer = client.read_response();
  EXPECT_EQ(topic_error_of(answer, "kept"), kLeaderNotAvailable);
  EXPECT_TRUE(partition_leaders(answer, "kept").empty());
  stop_member();
}

// Nor does it keep the clients that produce to it: a client asks for
// metadata only over connections that are up, so it would keep asking this
// member, which cannot name the new owner.
TEST_F(KafkaMetadataTest, AMemberWhoseLeaseLapsedLetsItsProducersGo) {
  SelfOwnership ownership(3);
  ownership.undecided_.insert("persistent://public/default/waits");
  start_member(ownership);
  Client producing(service_->port());
  Client produced(service_->port());
  Client asking(service_->port());
  ASSERT_TRUE(producing.ok() && produced.ok() && asking.ok());
  ASSERT_TRUE(produced.write_all(produce_request(1, "answered", "v")));
  ASSERT_FALSE(produced.read_response().empty());
  ASSERT_TRUE(producing.write_all(produce_request(1, "waits", "v")));
  // The lease current, the request waits and the connection stays (past
  // two looks at the lease).
  EXPECT_FALSE(producing.closed_within(2500));
  ownership.lease_ = false;
  EXPECT_TRUE(producing.closed_within(10000)) << "still open a while after the lease lapsed";
  // One that produced before is let go when it asks for metadata; one that
  // never produced here is answered.
  ASSERT_TRUE(produced.write_all(metadata_request(2, {"kept"})));
  EXPECT_TRUE(produced.closed_within(10000));
  ASSERT_TRUE(asking.write_all(metadata_request(2, {"kept"})));
  EXPECT_EQ(topic_error_of(asking.read_response(), "kept"), kLeaderNotAvailable);
  ownership.lease_ = true;
  ownership.decide();
  stop_member();
}

// Nor does it coordinate its groups: the member taking its bundles over
// does, and two coordinators would each accept a group's offsets.
TEST_F(KafkaMetadataTest, AMemberWhoseLeaseLapsedCoordinatesNoGroup) {
  SelfOwnership ownership(3);
  start_member(ownership);
  Client client(service_->port());
  ASSERT_TRUE(client.ok());
  auto find = [](int32_t id) {
    return request_of(kFindCoordinator, 1, id, [](Struct& b) {
      b.set("Key", std::string("orders"));
      b.set("KeyType", int64_t{0});
    });
  };
  auto heartbeat = [](int32_t id) {
    return request_of(kHeartbeat, 0, id, [](Struct& b) {
      b.set("GroupId", std::string("orders"));
      b.set("GenerationId", int64_t{1});
      b.set("MemberId", std::string("m-1"));
    });
  };
  ASSERT_TRUE(client.write_all(find(1)));
  EXPECT_EQ(error_of(client.read_response(), kFindCoordinator, 1), kNone);
  ASSERT_TRUE(client.write_all(heartbeat(2)));
  const int64_t served = error_of(client.read_response(), kHeartbeat, 0);
  EXPECT_NE(served, kNotCoordinator);
  EXPECT_NE(served, -100);

  ownership.lease_ = false;
  ASSERT_TRUE(client.write_all(find(3)));
  EXPECT_EQ(error_of(client.read_response(), kFindCoordinator, 1), kCoordinatorNotAvailable);
  ASSERT_TRUE(client.write_all(heartbeat(4)));
  EXPECT_EQ(error_of(client.read_response(), kHeartbeat, 0), kNotCoordinator);
  stop_member();
}

}  // namespace
}  // namespace magnetar::protocol::kafka
