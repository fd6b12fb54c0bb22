// The topic routes over real HTTP against an in-process node (storage,
// metadata, tenancy, broker and the admin service), with messages published
// through the broker: stats, peek, skip, reset, expiry, internal stats,
// metrics, and a reset that survives a restart.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <map>

#include <nlohmann/json.hpp>

#include "admin/admin_service.h"
#include "broker/broker_service.h"
#include "broker/tenancy.h"
#include "metadata/leveldb_store.h"
#include "utils/broker_fixture.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::admin {
namespace {

using common::Result;
using common::Status;
using Json = nlohmann::json;

constexpr auto kWait = std::chrono::seconds(30);
const std::string kTopic = "persistent://public/default/routes";
const std::string kPath = "/admin/v2/persistent/public/default/routes";

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  Json json() const { return Json::parse(body); }
};

// One request on its own connection; every wait is bounded by a poll timeout.
Reply http(uint16_t port, const std::string& method, const std::string& path, const std::string& body = "") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string raw;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30000) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  Reply r;
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  size_t line = raw.find("\r\n") + 2;
  while (line < head_end) {
    size_t next = raw.find("\r\n", line);
    std::string h = raw.substr(line, next - line);
    size_t colon = h.find(':');
    std::string name = h.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = h.substr(h.find_first_not_of(' ', colon + 1));
    line = next + 2;
  }
  r.body = raw.substr(head_end + 4);
  return r;
}

// The broker of BrokerFixture (real storage, metadata and runtime) with the
// tenancy component and the HTTP admin service on top.
class TopicRoutesTest : public broker::BrokerFixture {
 protected:
  void SetUp() override {
    BrokerFixture::SetUp();
    start_services();
  }
  void TearDown() override {
    stop_services();
    BrokerFixture::TearDown();
  }
  // A restart on the same data directory.
  void stop_node() {
    stop_services();
    close_node();
  }
  void start_node() {
    open_node();
    start_services();
  }
  void start_services() {
    tenancy_ = std::make_unique<broker::Tenancy>(*store_, broker::BootstrapDefaults{});
    ASSERT_TRUE(tenancy_->start().is_ok());
    AdvertisedAddress address;
    address.host = "127.0.0.1";
    address.pulsar_port = []() -> uint16_t { return 6650; };
    admin_ = std::make_unique<AdminService>(*runtime_, "127.0.0.1", 0, registry_, tenancy_.get(), broker_.get(),
                                            address);
    ASSERT_TRUE(admin_->start().is_ok());
  }
  void stop_services() {
    admin_->stop();
    admin_.reset();
    tenancy_->stop();
  }
  Reply call(const std::string& method, const std::string& path, const std::string& body = "") {
    return http(admin_->port(), method, path, body);
  }
  uint64_t backlog(const std::string& sub) {
    Reply r = call("GET", kPath + "/stats");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["subscriptions"][sub]["msgBacklog"].get<uint64_t>();
  }
  // Publishes one entry of `payload` bytes through the broker.
  void publish_entry(ledger::MessageHeader h, common::Slice payload) {
    auto topic = *broker::TopicName::parse(kTopic);
    auto p = std::make_shared<std::promise<Status>>();
    auto f = p->get_future();
    broker_->with_topic(topic, [p, h, payload](Result<broker::Topic*> t) {
      if (!t.is_ok()) return p->set_value(t.status());
      Status added = (*t)->add_producer(9, "pulsar-producer");
      if (!added.is_ok() && added.code() != common::ErrorCode::kAlreadyExists) return p->set_value(added);
      (*t)->publish(9, h, payload, [p](Result<ledger::Position> r) { p->set_value(r.status()); });
    });
    ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
    ASSERT_TRUE(f.get().is_ok());
  }
  // Publishes "m<i>" with publish time (i + 1) * 1000 ms, through the broker.
  void publish(int n) {
    auto topic = *broker::TopicName::parse(kTopic);
    for (int i = 0; i < n; ++i) {
      auto p = std::make_shared<std::promise<Status>>();
      auto f = p->get_future();
      broker_->with_topic(topic, [p, i](Result<broker::Topic*> t) {
        if (!t.is_ok()) return p->set_value(t.status());
        if (i == 0 && !(*t)->add_producer(1, "producer-a").is_ok()) return p->set_value(Status::internal("no producer"));
        ledger::MessageHeader h;
        h.publish_time_ms = (i + 1) * 1000;
        h.sequence_id = i;
        (*t)->publish(1, h, common::Slice::copy_of("m" + std::to_string(i)),
                      [p](Result<ledger::Position> r) { p->set_value(r.status()); });
      });
      ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
      ASSERT_TRUE(f.get().is_ok());
    }
  }

  common::MetricsRegistry registry_;
  std::unique_ptr<broker::Tenancy> tenancy_;
  std::unique_ptr<AdminService> admin_;
};

TEST_F(TopicRoutesTest, CursorRoutesWorkOnRealMessages) {
  ASSERT_EQ(call("PUT", kPath).status, 204);
  ASSERT_EQ(call("PUT", kPath + "/subscription/s?messageId=earliest").status, 204);
  publish(5);

  Json stats = call("GET", kPath + "/stats").json();
  EXPECT_EQ(stats["msgInCounter"], 5);
  EXPECT_EQ(stats["bytesInCounter"], 10);
  EXPECT_EQ(stats["averageMsgSize"], 2.0);
  EXPECT_GT(stats["storageSize"].get<uint64_t>(), 0u);
  EXPECT_EQ(stats["backlogSize"], 10);
  ASSERT_EQ(stats["publishers"].size(), 1u);
  EXPECT_EQ(stats["publishers"][0]["producerName"], "producer-a");
  EXPECT_EQ(stats["publishers"][0]["producerId"], 1);
  EXPECT_EQ(stats["subscriptions"]["s"]["msgBacklog"], 5);

  Reply peek = call("GET", kPath + "/subscription/s/position/1");
  ASSERT_EQ(peek.status, 200) << peek.body;
  EXPECT_EQ(peek.body, "m0");
  EXPECT_EQ(peek.headers["content-type"], "application/octet-stream");
  EXPECT_EQ(peek.headers["x-pulsar-producer-name"], "producer-a");
  EXPECT_EQ(peek.headers["x-pulsar-publish-time"], "1970-01-01T00:00:01.000Z");
  EXPECT_EQ(peek.headers["x-pulsar-sequence-id"], "0");
  EXPECT_EQ(peek.headers["x-pulsar-message-id"].find(':') != std::string::npos, true);
  EXPECT_EQ(call("GET", kPath + "/subscription/s/position/5").body, "m4");
  EXPECT_EQ(call("GET", kPath + "/subscription/s/position/6").status, 404);

  ASSERT_EQ(call("POST", kPath + "/subscription/s/skip/2").status, 204);
  EXPECT_EQ(backlog("s"), 3u);
  EXPECT_EQ(call("GET", kPath + "/subscription/s/position/1").body, "m2");
  ASSERT_EQ(call("POST", kPath + "/subscription/s/skip/100").status, 204);
  EXPECT_EQ(backlog("s"), 0u);

  // Back to everything, then to the first message published at or after 3 s.
  ASSERT_EQ(call("POST", kPath + "/subscription/s/resetcursor/0").status, 204);
  EXPECT_EQ(backlog("s"), 5u);
  ASSERT_EQ(call("POST", kPath + "/subscription/s/resetcursor/2500").status, 204);
  EXPECT_EQ(backlog("s"), 3u);
  EXPECT_EQ(call("GET", kPath + "/subscription/s/position/1").body, "m2");
  ASSERT_EQ(call("POST", kPath + "/subscription/s/resetcursor/99999999999").status, 204);
  EXPECT_EQ(backlog("s"), 0u);

  // Every message was published in 1970: older than an hour.
  ASSERT_EQ(call("POST", kPath + "/subscription/s/resetcursor/0").status, 204);
  ASSERT_EQ(call("PUT", kPath + "/subscription/t?messageId=earliest").status, 204);
  ASSERT_EQ(call("POST", kPath + "/subscription/s/expireMessages/3600").status, 204);
  EXPECT_EQ(backlog("s"), 0u);
  EXPECT_EQ(backlog("t"), 5u);
  ASSERT_EQ(call("POST", kPath + "/all_subscription/expireMessages/3600").status, 204);
  EXPECT_EQ(backlog("t"), 0u);
  ASSERT_EQ(call("POST", kPath + "/subscription/t/resetcursor/0").status, 204);
  ASSERT_EQ(call("POST", kPath + "/subscription/t/skip_all").status, 204);
  EXPECT_EQ(backlog("t"), 0u);

  // A subscription that starts at a given message.
  Json internal = call("GET", kPath + "/internalStats").json();
  EXPECT_EQ(internal["numberOfEntries"], 5);
  EXPECT_EQ(internal["entriesAddedCounter"], 5);
  EXPECT_EQ(internal["totalSize"], 10);
  ASSERT_EQ(internal["ledgers"].size(), 1u);
  const uint64_t ledger = internal["ledgers"][0]["ledgerId"].get<uint64_t>();
  EXPECT_EQ(internal["lastConfirmedEntry"], std::to_string(ledger) + ":4");
  EXPECT_EQ(internal["cursors"]["t"]["markDeletePosition"], std::to_string(ledger) + ":4");
  Json from = {{"ledgerId", ledger}, {"entryId", 3}};
  ASSERT_EQ(call("PUT", kPath + "/subscription/u", from.dump()).status, 204);
  EXPECT_EQ(backlog("u"), 2u);
  EXPECT_EQ(call("GET", kPath + "/subscription/u/position/1").body, "m3");

  // Reset to a message id: that message comes next, or the one after it.
  Json to_m1 = {{"ledgerId", ledger}, {"entryId", 1}};
  ASSERT_EQ(call("POST", kPath + "/subscription/t/resetcursor", to_m1.dump()).status, 204);
  EXPECT_EQ(backlog("t"), 4u);
  EXPECT_EQ(call("GET", kPath + "/subscription/t/position/1").body, "m1");
  to_m1["isExcluded"] = true;
  ASSERT_EQ(call("POST", kPath + "/subscription/t/resetcursor", to_m1.dump()).status, 204);
  EXPECT_EQ(call("GET", kPath + "/subscription/t/position/1").body, "m2");
  EXPECT_EQ(call("POST", kPath + "/subscription/t/resetcursor", Json{{"ledgerId", ledger + 100}, {"entryId", 0}}.dump())
                .status,
            404);
  EXPECT_EQ(call("POST", kPath + "/subscription/t/resetcursor", "{\"ledgerId\": \"x\"}").status, 400);
  EXPECT_EQ(call("POST", kPath + "/subscription/t/resetcursor", "not json").status, 400);
  ASSERT_EQ(call("POST", kPath + "/subscription/t/skip_all").status, 204);

  // The metrics carry the topic, gathered from its reactor at scrape time.
  Reply metrics = call("GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  const std::string labels =
      "{cluster=\"standalone\",namespace=\"public/default\",topic=\"persistent://public/default/routes\"}";
  EXPECT_NE(metrics.body.find("pulsar_in_messages_total" + labels + " 5"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("pulsar_msg_backlog" + labels + " 2"), std::string::npos);
  EXPECT_NE(metrics.body.find("pulsar_producers_count" + labels + " 1"), std::string::npos);
  EXPECT_NE(metrics.body.find("pulsar_subscriptions_count" + labels + " 3"), std::string::npos);
  EXPECT_NE(metrics.body.find("pulsar_storage_size" + labels + " 10"), std::string::npos);

  // The deletion needs force while a producer is connected.
  EXPECT_EQ(call("DELETE", kPath).status, 412);
}

TEST_F(TopicRoutesTest, PeekAnswersAPulsarEntrysPayloadWithItsMetadataInHeaders) {
  ASSERT_EQ(call("PUT", kPath).status, 204);
  ASSERT_EQ(call("PUT", kPath + "/subscription/s").status, 204);
  protocol::pulsar::proto::MessageMetadata md;
  md.set_producer_name("pulsar-producer");
  md.set_sequence_id(42);
  md.set_publish_time(1500);
  md.set_partition_key("k1");
  auto* prop = md.add_properties();
  prop->set_key("traceId");
  prop->set_value("t-1");
  ledger::MessageHeader h;
  h.publish_time_ms = 1500;
  h.sequence_id = 42;
  publish_entry(h, protocol::pulsar::encode_entry(md, "hello pulsar"));
  Reply peek = call("GET", kPath + "/subscription/s/position/1");
  ASSERT_EQ(peek.status, 200) << peek.body;
  EXPECT_EQ(peek.body, "hello pulsar");
  EXPECT_EQ(peek.headers["x-pulsar-producer-name"], "pulsar-producer");
  EXPECT_EQ(peek.headers["x-pulsar-sequence-id"], "42");
  EXPECT_EQ(peek.headers["x-pulsar-publish-time"], "1970-01-01T00:00:01.500Z");
  EXPECT_EQ(peek.headers["x-pulsar-key"], "k1");
  EXPECT_EQ(Json::parse(peek.headers["x-pulsar-property"]), (Json{{"traceId", "t-1"}}));
  EXPECT_EQ(peek.headers.count("x-pulsar-num-batch-message"), 0u);
}

TEST_F(TopicRoutesTest, AResetCursorSurvivesARestart) {
  ASSERT_EQ(call("PUT", kPath).status, 204);
  ASSERT_EQ(call("PUT", kPath + "/subscription/s").status, 204);  // latest: nothing to read yet
  publish(4);
  EXPECT_EQ(backlog("s"), 4u);
  ASSERT_EQ(call("POST", kPath + "/subscription/s/skip_all").status, 204);
  ASSERT_EQ(call("POST", kPath + "/subscription/s/resetcursor/2000").status, 204);
  EXPECT_EQ(backlog("s"), 3u);
  stop_node();
  start_node();
  EXPECT_EQ(backlog("s"), 3u);
  EXPECT_EQ(call("GET", kPath + "/subscription/s/position/1").body, "m1");
  Reply lookup = call("GET", "/lookup/v2/topic/persistent/public/default/routes");
  ASSERT_EQ(lookup.status, 200);
  EXPECT_EQ(lookup.json()["brokerUrl"], "pulsar://127.0.0.1:6650");
  EXPECT_EQ(lookup.json()["httpUrl"], "http://127.0.0.1:" + std::to_string(admin_->port()));
  ASSERT_EQ(call("DELETE", kPath + "?force=true").status, 204);
  EXPECT_EQ(call("GET", kPath + "/stats").status, 404);
}

}  // namespace
}  // namespace magnetar::admin
