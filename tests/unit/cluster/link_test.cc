// Links on real sockets (127.0.0.1, port 0), one uv loop run by the test thread: the handshake, what strangers
// get, and libraft running over the links. Every wait is bounded by a deadline; none measures speed.
#include "cluster/link.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/libraft.h"
#include "cluster/link_format.h"
#include "cluster/raft_consensus.h"
#include "unit/cluster/fixture_cluster.h"

extern "C" {
#include <raft/uv.h>
}

namespace magnetar::cluster {
namespace {

using common::ErrorCode;
using common::Result;
using common::Status;
using namespace std::chrono_literals;

ClusterSecret secret_a() { return ClusterSecret::from_bytes(std::string(32, 'a')); }
ClusterSecret secret_b() { return ClusterSecret::from_bytes(std::string(32, 'b')); }

std::string local(int port) { return "127.0.0.1:" + std::to_string(port); }

// Collects what arrives on a stream, until EOF or an error.
struct StreamReader {
  std::string data;
  bool ended = false;
  int error = 0;

  void start(uv_tcp_t* stream) {
    stream->data = this;
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(stream),
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
          static char scratch[65536];
          *buf = uv_buf_init(scratch, sizeof scratch);
        },
        [](uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
          auto* self = static_cast<StreamReader*>(s->data);
          if (nread > 0) self->data.append(buf->base, static_cast<size_t>(nread));
          if (nread < 0) {
            self->ended = true;
            self->error = static_cast<int>(nread);
            uv_read_stop(s);
          }
        });
  }
};

void write_bytes(uv_tcp_t* stream, std::string bytes) {
  struct Write {
    uv_write_t req;
    std::string bytes;
  };
  auto* w = new Write{{}, std::move(bytes)};
  w->req.data = w;
  uv_buf_t buf = uv_buf_init(w->bytes.data(), static_cast<unsigned>(w->bytes.size()));
  int rv = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(stream), &buf, 1,
                    [](uv_write_t* req, int) { delete static_cast<Write*>(req->data); });
  if (rv != 0) delete w;
}

// A plain TCP client that says what it is told to and records whether the server hung up.
struct RawClient {
  uv_tcp_t* tcp = nullptr;
  uv_connect_t connect{};
  std::string to_send;
  bool connected = false;
  StreamReader reader;
  bool closed = false;

  RawClient(uv_loop_t* loop, int port, std::string bytes) : to_send(std::move(bytes)) {
    tcp = new uv_tcp_t;
    uv_tcp_init(loop, tcp);
    sockaddr_in addr{};
    uv_ip4_addr("127.0.0.1", port, &addr);
    connect.data = this;
    uv_tcp_connect(&connect, tcp, reinterpret_cast<const sockaddr*>(&addr), [](uv_connect_t* req, int status) {
      auto* self = static_cast<RawClient*>(req->data);
      if (status != 0) {
        self->reader.ended = true;
        return;
      }
      self->connected = true;
      if (!self->to_send.empty()) write_bytes(self->tcp, self->to_send);
      self->reader.start(self->tcp);
    });
  }
  bool hung_up() const { return reader.ended; }
  void close() {
    tcp->data = this;
    uv_close(reinterpret_cast<uv_handle_t*>(tcp), [](uv_handle_t* h) {
      auto* self = static_cast<RawClient*>(h->data);
      delete reinterpret_cast<uv_tcp_t*>(h);
      self->closed = true;
    });
  }
};

// A TCP server that accepts and then says nothing.
struct SilentServer {
  uv_tcp_t server{};
  std::vector<uv_tcp_t*> accepted;
  int port = 0;
  int open_handles = 0;

  explicit SilentServer(uv_loop_t* loop) {
    uv_tcp_init(loop, &server);
    server.data = this;
    open_handles = 1;
    sockaddr_in addr{};
    uv_ip4_addr("127.0.0.1", 0, &addr);
    uv_tcp_bind(&server, reinterpret_cast<const sockaddr*>(&addr), 0);
    uv_listen(reinterpret_cast<uv_stream_t*>(&server), 16, [](uv_stream_t* s, int status) {
      auto* self = static_cast<SilentServer*>(s->data);
      if (status != 0) return;
      auto* client = new uv_tcp_t;
      uv_tcp_init(s->loop, client);
      client->data = self;
      self->open_handles++;
      uv_accept(s, reinterpret_cast<uv_stream_t*>(client));
      self->accepted.push_back(client);
    });
    sockaddr_storage bound{};
    int len = sizeof bound;
    uv_tcp_getsockname(&server, reinterpret_cast<sockaddr*>(&bound), &len);
    port = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  void close() {
    auto closed = [](uv_handle_t* h) {
      auto* self = static_cast<SilentServer*>(h->data);
      if (h != reinterpret_cast<uv_handle_t*>(&self->server)) delete reinterpret_cast<uv_tcp_t*>(h);
      self->open_handles--;
    };
    for (uv_tcp_t* c : accepted) uv_close(reinterpret_cast<uv_handle_t*>(c), closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&server), closed);
  }
};

// What one connect() reported.
struct Outcome {
  std::optional<Result<uv_tcp_t*>> result;
  bool done() const { return result.has_value(); }
  ConnectCallback callback() {
    return [this](Result<uv_tcp_t*> r) {
      EXPECT_FALSE(result.has_value()) << "done ran twice";
      result = std::move(r);
    };
  }
};

struct Accepted {
  Peer peer;
  uv_tcp_t* stream = nullptr;
};

class LinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    uv_timer_init(&loop_, &tick_);
  }

  void TearDown() override {
    uv_close(reinterpret_cast<uv_handle_t*>(&tick_), nullptr);
    for (int i = 0; i < 1000 && uv_loop_alive(&loop_); i++) uv_run(&loop_, UV_RUN_NOWAIT);
    uv_walk(
        &loop_, [](uv_handle_t* h, void*) { ADD_FAILURE() << "handle left open: " << uv_handle_type_name(h->type); },
        nullptr);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  // Runs the loop until `done` holds; false if it did not within `limit`.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    uv_timer_start(&tick_, [](uv_timer_t*) {}, 5, 5);  // uv_run returns at least this often
    bool ok = true;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ok = false;
        break;
      }
      uv_run(&loop_, UV_RUN_ONCE);
    }
    uv_timer_stop(&tick_);
    return ok;
  }

  // Runs the loop for `time`, whatever happens.
  void run_for(std::chrono::milliseconds time) {
    run_until([] { return false; }, time);
  }

  std::unique_ptr<LinkListener> listener(const ClusterSecret& secret, ServerId id = 1) {
    auto l = std::make_unique<LinkListener>(&loop_, secret, id, "127.0.0.1");
    Status st = l->listen("127.0.0.1", 0);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_GT(l->port(), 0);
    return l;
  }

  std::unique_ptr<LinkConnector> connector(const ClusterSecret& secret, ServerId id = 2,
                                           std::string address = "127.0.0.1:9") {
    return std::make_unique<LinkConnector>(&loop_, secret, id, std::move(address));
  }

  // Records every accepted stream of `channel` in `out`.
  static void record(LinkListener& l, Channel channel, std::vector<Accepted>& out) {
    l.set_handler(channel, [&out](const Peer& peer, uv_tcp_t* stream) { out.push_back({peer, stream}); });
  }

  void close_all(LinkListener* l, LinkConnector* c) {
    bool l_closed = l == nullptr;
    bool c_closed = c == nullptr;
    if (l) l->close([&] { l_closed = true; });
    if (c) c->close([&] { c_closed = true; });
    EXPECT_TRUE(run_until([&] { return l_closed && c_closed; }));
  }

  void close_streams(std::vector<uv_tcp_t*> streams) {
    for (uv_tcp_t* s : streams) close_stream(s);
    run_for(20ms);
  }

  // A connect that must succeed; the accepted side's record is appended to `accepted`.
  uv_tcp_t* connect_ok(LinkConnector& c, int port, Channel channel) {
    Outcome o;
    c.connect(local(port), channel, o.callback());
    EXPECT_TRUE(run_until([&] { return o.done(); }));
    if (!o.done()) return nullptr;
    EXPECT_TRUE(o.result->is_ok()) << o.result->status().to_string();
    return o.result->is_ok() ? o.result->value() : nullptr;
  }

  uv_loop_t loop_{};
  uv_timer_t tick_{};
};

TEST_F(LinkTest, OpensEachChannelAndCarriesBytesBothWaysWithNothingLeftOver) {
  auto l = listener(secret_a(), 1);
  auto c = connector(secret_a(), 2, "10.0.0.2:7000");
  std::vector<Accepted> accepted;
  // The server speaks first, at once: the client must not eat those bytes with the verdict.
  for (Channel ch : {Channel::kRaft, Channel::kRpc}) {
    l->set_handler(ch, [&accepted, ch](const Peer& peer, uv_tcp_t* stream) {
      accepted.push_back({peer, stream});
      write_bytes(stream, "from-server-" + std::to_string(static_cast<int>(ch)));
    });
  }
  for (Channel ch : {Channel::kRaft, Channel::kRpc}) {
    SCOPED_TRACE(static_cast<int>(ch));
    accepted.clear();
    Outcome o;
    c->connect(local(l->port()), ch, o.callback());
    EXPECT_FALSE(o.done());  // never inline
    ASSERT_TRUE(run_until([&] { return o.done() && accepted.size() == 1; }));
    ASSERT_TRUE(o.result->is_ok()) << o.result->status().to_string();
    uv_tcp_t* client = o.result->value();
    uv_tcp_t* server = accepted[0].stream;
    EXPECT_EQ(accepted[0].peer.id, 2u);
    EXPECT_EQ(accepted[0].peer.address, "10.0.0.2:7000");
    EXPECT_EQ(client->data, nullptr);  // free for the owner
    EXPECT_EQ(server->data, nullptr);

    // The client writes before the server reads: the server must see exactly these bytes.
    write_bytes(client, "from-client");
    StreamReader at_server, at_client;
    at_server.start(server);
    at_client.start(client);
    std::string want_at_client = "from-server-" + std::to_string(static_cast<int>(ch));
    ASSERT_TRUE(run_until([&] {
      return at_server.data.size() >= 11 && at_client.data.size() >= want_at_client.size();
    }));
    run_for(20ms);  // nothing more may follow
    EXPECT_EQ(at_server.data, "from-client");
    EXPECT_EQ(at_client.data, want_at_client);
    close_streams({client, server});
  }
  close_all(l.get(), c.get());
}

TEST_F(LinkTest, WrongSecretIsPermissionDeniedAndNeverReachesTheHandler) {
  auto l = listener(secret_a());
  std::vector<Accepted> accepted;
  record(*l, Channel::kRaft, accepted);
  record(*l, Channel::kRpc, accepted);
  auto stranger = connector(secret_b());
  for (Channel ch : {Channel::kRaft, Channel::kRpc}) {
    Outcome o;
    stranger->connect(local(l->port()), ch, o.callback());
    ASSERT_TRUE(run_until([&] { return o.done(); }));
    ASSERT_FALSE(o.result->is_ok());
    EXPECT_EQ(o.result->status().code(), ErrorCode::kPermissionDenied) << o.result->status().to_string();
  }
  run_for(50ms);
  EXPECT_TRUE(accepted.empty());

  // A member with the right secret still gets in.
  auto member = connector(secret_a());
  uv_tcp_t* s = connect_ok(*member, l->port(), Channel::kRaft);
  ASSERT_TRUE(run_until([&] { return accepted.size() == 1; }));
  close_streams({s, accepted[0].stream});
  close_all(l.get(), stranger.get());
  close_all(nullptr, member.get());
}

TEST_F(LinkTest, MemberRefusesAServerWithAnotherSecret) {
  auto l = listener(secret_b());
  std::vector<Accepted> accepted;
  record(*l, Channel::kRaft, accepted);
  auto c = connector(secret_a());
  Outcome o;
  c->connect(local(l->port()), Channel::kRaft, o.callback());
  ASSERT_TRUE(run_until([&] { return o.done(); }));
  ASSERT_FALSE(o.result->is_ok());
  EXPECT_EQ(o.result->status().code(), ErrorCode::kPermissionDenied);
  run_for(50ms);
  EXPECT_TRUE(accepted.empty());
  close_all(l.get(), c.get());
}

// A hello as a member would send it, to be altered by a test.
std::string good_hello(uint8_t channel = 1, std::string address = "127.0.0.1:1") {
  return link_format::encode_hello(channel, std::string(link_format::kNonceBytes, 'n'), 5, address);
}

TEST_F(LinkTest, ForgedProofIsClosedWithoutAVerdict) {
  auto l = listener(secret_a());
  std::vector<Accepted> accepted;
  record(*l, Channel::kRaft, accepted);
  // A stranger can send a well-formed hello and read the welcome, but not prove it holds the secret.
  RawClient raw(&loop_, l->port(), good_hello() + std::string(link_format::kProofBytes, 'x'));
  ASSERT_TRUE(run_until([&] { return raw.hung_up(); }));
  EXPECT_EQ(raw.reader.data.size(), link_format::kWelcomeBytes);  // the welcome, and no verdict
  EXPECT_TRUE(accepted.empty());
  raw.close();
  ASSERT_TRUE(run_until([&] { return raw.closed; }));
  close_all(l.get(), nullptr);
}

TEST_F(LinkTest, MalformedHandshakesAreClosedAndTheListenerCarriesOn) {
  auto l = listener(secret_a());
  std::vector<Accepted> accepted;
  record(*l, Channel::kRaft, accepted);
  std::string wrong_magic = good_hello();
  wrong_magic[0] = 'X';
  std::string wrong_version = good_hello();
  wrong_version[4] = 2;
  std::string server_zero = good_hello();
  for (size_t i = 0; i < 8; i++) server_zero[6 + link_format::kNonceBytes + i] = 0;
  std::string no_address = good_hello().substr(0, link_format::kHelloHeadBytes);
  no_address[link_format::kHelloHeadBytes - 2] = 0;
  no_address[link_format::kHelloHeadBytes - 1] = 0;
  std::string long_address = no_address;
  long_address[link_format::kHelloHeadBytes - 2] = 1;  // 256 bytes, over the limit
  std::string unprintable = good_hello(1, "127.0.0.1:1");
  unprintable.back() = '\n';
  std::vector<std::string> cases = {
      "GET / HTTP/1.1\r\nHost: example\r\nAccept: */*\r\n\r\n",
      std::string(200, '\0'),
      wrong_magic,
      wrong_version,
      server_zero,
      no_address,
      long_address + std::string(300, 'a'),
      unprintable,
  };
  std::vector<std::unique_ptr<RawClient>> raws;
  for (const std::string& bytes : cases) raws.push_back(std::make_unique<RawClient>(&loop_, l->port(), bytes));
  ASSERT_TRUE(run_until([&] {
    for (auto& r : raws) {
      if (!r->hung_up()) return false;
    }
    return true;
  }));
  for (size_t i = 0; i < raws.size(); i++) {
    EXPECT_TRUE(raws[i]->connected) << "case " << i;
    EXPECT_TRUE(raws[i]->reader.data.empty()) << "case " << i << " got an answer";
  }
  EXPECT_TRUE(accepted.empty());

  auto member = connector(secret_a());
  uv_tcp_t* s = connect_ok(*member, l->port(), Channel::kRaft);
  ASSERT_TRUE(run_until([&] { return accepted.size() == 1; }));
  close_streams({s, accepted[0].stream});
  for (auto& r : raws) r->close();
  ASSERT_TRUE(run_until([&] {
    for (auto& r : raws) {
      if (!r->closed) return false;
    }
    return true;
  }));
  close_all(l.get(), member.get());
}

TEST_F(LinkTest, SilentOrTruncatedHandshakesTimeOut) {
  auto l = std::make_unique<LinkListener>(&loop_, secret_a(), 1, "127.0.0.1");
  l->set_handshake_timeout(200);
  ASSERT_TRUE(l->listen("127.0.0.1", 0).is_ok());
  std::vector<Accepted> accepted;
  record(*l, Channel::kRaft, accepted);
  std::vector<std::unique_ptr<RawClient>> raws;
  raws.push_back(std::make_unique<RawClient>(&loop_, l->port(), ""));
  raws.push_back(std::make_unique<RawClient>(&loop_, l->port(), "MGCL\x01"));
  raws.push_back(std::make_unique<RawClient>(&loop_, l->port(), good_hello().substr(0, 35)));
  raws.push_back(std::make_unique<RawClient>(&loop_, l->port(), good_hello()));  // then no proof
  ASSERT_TRUE(run_until([&] {
    for (auto& r : raws) {
      if (!r->hung_up()) return false;
    }
    return true;
  }));
  EXPECT_EQ(raws[3]->reader.data.size(), link_format::kWelcomeBytes);
  EXPECT_TRUE(accepted.empty());

  auto member = connector(secret_a());
  uv_tcp_t* s = connect_ok(*member, l->port(), Channel::kRaft);
  ASSERT_TRUE(run_until([&] { return accepted.size() == 1; }));
  close_streams({s, accepted[0].stream});
  for (auto& r : raws) r->close();
  ASSERT_TRUE(run_until([&] {
    for (auto& r : raws) {
      if (!r->closed) return false;
    }
    return true;
  }));
  close_all(l.get(), member.get());
}

TEST_F(LinkTest, ChannelWithoutHandlerIsRefused) {
  auto l = listener(secret_a());
  std::vector<Accepted> accepted;
  record(*l, Channel::kRaft, accepted);
  auto c = connector(secret_a());
  Outcome o;
  c->connect(local(l->port()), Channel::kRpc, o.callback());
  ASSERT_TRUE(run_until([&] { return o.done(); }));
  ASSERT_FALSE(o.result->is_ok());
  EXPECT_EQ(o.result->status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(o.result->status().message().find("does not serve rpc"), std::string::npos)
      << o.result->status().to_string();

  // Removing a handler refuses its channel from then on.
  l->set_handler(Channel::kRaft, nullptr);
  Outcome removed;
  c->connect(local(l->port()), Channel::kRaft, removed.callback());
  ASSERT_TRUE(run_until([&] { return removed.done(); }));
  EXPECT_EQ(removed.result->status().code(), ErrorCode::kUnavailable);

  record(*l, Channel::kRpc, accepted);
  uv_tcp_t* s = connect_ok(*c, l->port(), Channel::kRpc);
  ASSERT_TRUE(run_until([&] { return accepted.size() == 1; }));
  close_streams({s, accepted[0].stream});
  close_all(l.get(), c.get());
}

TEST_F(LinkTest, HandshakesBeyondTheLimitAreClosedAtOnce) {
  auto l = std::make_unique<LinkListener>(&loop_, secret_a(), 1, "127.0.0.1");
  l->set_max_handshakes(2);
  l->set_handshake_timeout(60000);
  ASSERT_TRUE(l->listen("127.0.0.1", 0).is_ok());
  std::vector<std::unique_ptr<RawClient>> raws;
  raws.push_back(std::make_unique<RawClient>(&loop_, l->port(), "MGCL"));
  raws.push_back(std::make_unique<RawClient>(&loop_, l->port(), "MGCL"));
  ASSERT_TRUE(run_until([&] { return raws[0]->connected && raws[1]->connected; }));
  run_for(50ms);  // the listener has accepted both
  raws.push_back(std::make_unique<RawClient>(&loop_, l->port(), "MGCL"));
  ASSERT_TRUE(run_until([&] { return raws[2]->hung_up(); }));
  EXPECT_FALSE(raws[0]->hung_up());
  EXPECT_FALSE(raws[1]->hung_up());

  // Closing the listener drops the handshakes in progress.
  bool closed = false;
  l->close([&] { closed = true; });
  ASSERT_TRUE(run_until([&] { return closed && raws[0]->hung_up() && raws[1]->hung_up(); }));
  for (auto& r : raws) r->close();
  ASSERT_TRUE(run_until([&] { return raws[0]->closed && raws[1]->closed && raws[2]->closed; }));
}

TEST_F(LinkTest, UnreachableOrSilentPeersAreUnavailable) {
  // A port nobody listens on: bind one, then let it go.
  auto gone = listener(secret_a());
  int free_port = gone->port();
  close_all(gone.get(), nullptr);

  auto c = connector(secret_a());
  Outcome refused;
  c->connect(local(free_port), Channel::kRaft, refused.callback());
  ASSERT_TRUE(run_until([&] { return refused.done(); }));
  EXPECT_EQ(refused.result->status().code(), ErrorCode::kUnavailable) << refused.result->status().to_string();

  SilentServer silent(&loop_);
  Outcome timed_out;
  c->connect(local(silent.port), Channel::kRaft, timed_out.callback(), 200);
  ASSERT_TRUE(run_until([&] { return timed_out.done(); }));
  EXPECT_EQ(timed_out.result->status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(timed_out.result->status().message().find("timed out"), std::string::npos)
      << timed_out.result->status().to_string();

  Outcome malformed;
  c->connect("no-port-here", Channel::kRaft, malformed.callback());
  EXPECT_FALSE(malformed.done());
  ASSERT_TRUE(run_until([&] { return malformed.done(); }));
  EXPECT_EQ(malformed.result->status().code(), ErrorCode::kInvalidArgument);

  silent.close();
  ASSERT_TRUE(run_until([&] { return silent.open_handles == 0; }));
  close_all(nullptr, c.get());
}

TEST_F(LinkTest, CloseFailsPendingConnects) {
  SilentServer silent(&loop_);
  auto c = connector(secret_a());
  Outcome pending;
  c->connect(local(silent.port), Channel::kRpc, pending.callback(), 60000);
  ASSERT_TRUE(run_until([&] { return silent.accepted.size() == 1; }));
  bool closed = false;
  c->close([&] {
    EXPECT_TRUE(pending.done());  // done runs before closed
    closed = true;
  });
  EXPECT_FALSE(pending.done());
  ASSERT_TRUE(run_until([&] { return closed; }));
  EXPECT_EQ(pending.result->status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(pending.result->status().message().find("shutting down"), std::string::npos);
  silent.close();
  ASSERT_TRUE(run_until([&] { return silent.open_handles == 0; }));
}

TEST_F(LinkTest, ResolvesLocalhostAndSpeaksIpv6) {
  auto l = std::make_unique<LinkListener>(&loop_, secret_a(), 1, "localhost");
  ASSERT_TRUE(l->listen("localhost", 0).is_ok());
  std::vector<Accepted> accepted;
  record(*l, Channel::kRpc, accepted);
  auto c = connector(secret_a());
  Outcome o;
  c->connect("localhost:" + std::to_string(l->port()), Channel::kRpc, o.callback());
  ASSERT_TRUE(run_until([&] { return o.done() && accepted.size() == 1; }));
  ASSERT_TRUE(o.result->is_ok()) << o.result->status().to_string();
  close_streams({o.result->value(), accepted[0].stream});
  close_all(l.get(), nullptr);

  auto l6 = std::make_unique<LinkListener>(&loop_, secret_a(), 1, "[::1]");
  Status st = l6->listen("::1", 0);
  if (!st.is_ok()) {
    close_all(l6.get(), c.get());
    GTEST_SKIP() << "no IPv6 loopback here: " << st.to_string();
  }
  accepted.clear();
  record(*l6, Channel::kRpc, accepted);
  Outcome o6;
  c->connect("[::1]:" + std::to_string(l6->port()), Channel::kRpc, o6.callback());
  ASSERT_TRUE(run_until([&] { return o6.done() && accepted.size() == 1; }));
  ASSERT_TRUE(o6.result->is_ok()) << o6.result->status().to_string();
  close_streams({o6.result->value(), accepted[0].stream});
  close_all(l6.get(), c.get());
}

// One member of a cluster over raft_uv and the links, with a machine that records what it applies.
struct RaftMember {
  ServerId id = 0;
  std::string dir;
  std::string address;
  std::unique_ptr<LinkListener> listener;
  std::unique_ptr<LinkConnector> connector;
  std::unique_ptr<RaftLinkTransport> transport;
  raft_io io{};
  bool io_initialized = false;
  testing::LogMachine machine;
  std::unique_ptr<RaftConsensus> consensus;
};

class RaftOverLinksTest : public LinkTest {
 protected:
  void TearDown() override {
    shut_down();
    for (auto& m : members_) {
      if (!m->dir.empty()) std::filesystem::remove_all(m->dir);
    }
    members_.clear();
    LinkTest::TearDown();
  }

  RaftMember& add_member(ServerId id, const ClusterSecret& secret) {
    auto m = std::make_unique<RaftMember>();
    m->id = id;
    char tmpl[] = "/tmp/magnetar-link-raft-XXXXXX";
    EXPECT_NE(mkdtemp(tmpl), nullptr);
    m->dir = tmpl;
    m->listener = std::make_unique<LinkListener>(&loop_, secret, id, "127.0.0.1");
    Status st = m->listener->listen("127.0.0.1", 0);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    m->address = local(m->listener->port());
    m->connector = std::make_unique<LinkConnector>(&loop_, secret, id, m->address);
    m->transport = std::make_unique<RaftLinkTransport>(*m->listener, *m->connector);
    EXPECT_EQ(raft_uv_init(&m->io, &loop_, m->dir.c_str(), m->transport->get()), 0);
    m->io_initialized = true;
    raft_uv_set_connect_retry_delay(&m->io, 100);
    ConsensusOptions options;
    options.election_timeout_ms = 500;
    options.heartbeat_timeout_ms = 50;
    auto created = RaftConsensus::create(&m->io, id, m->address, m->machine, options);
    EXPECT_TRUE(created.is_ok()) << created.status().to_string();
    if (created.is_ok()) m->consensus = std::move(created.value());
    members_.push_back(std::move(m));
    return *members_.back();
  }

  // Closes raft on every member, then the links; the loop ends with no handle open.
  void shut_down() {
    shutting_down_ = true;
    int closing = 0;
    for (auto& m : members_) {
      if (!m->consensus) continue;
      closing++;
      m->consensus->close([&closing] { closing--; });
    }
    EXPECT_TRUE(run_until([&] { return closing == 0; }));
    for (auto& m : members_) {
      m->consensus.reset();
      if (m->io_initialized) raft_uv_close(&m->io);
      m->io_initialized = false;
      m->transport.reset();
      close_all(m->listener.get(), m->connector.get());
      m->listener.reset();
      m->connector.reset();
    }
  }

  // What each member applied, for failure messages.
  std::string applied_text() {
    std::string out;
    for (auto& m : members_) {
      out += "[" + std::to_string(m->id) + ":";
      for (const std::string& c : m->machine.commands) out += " '" + c + "'";
      out += "] ";
    }
    return out;
  }

  std::optional<ServerId> leader() {
    for (auto& m : members_) {
      if (m->consensus && m->consensus->is_leader()) return m->id;
    }
    return std::nullopt;
  }

  RaftMember& member(ServerId id) {
    for (auto& m : members_) {
      if (m->id == id) return *m;
    }
    ADD_FAILURE() << "no member " << id;
    return *members_.front();
  }

  std::vector<std::unique_ptr<RaftMember>> members_;
  // What the members' callbacks report; members of the fixture, as raft calls back until shut_down().
  int committed_ = 0;
  std::optional<Status> added_;
  bool shutting_down_ = false;
};

TEST_F(RaftOverLinksTest, ThreeMembersElectAndApplyAndAStrangerCannotJoin) {
  for (ServerId id : {1, 2, 3}) add_member(id, secret_a());
  std::vector<Server> voters;
  for (auto& m : members_) voters.push_back({m->id, m->address, Role::kVoter});
  for (auto& m : members_) {
    ASSERT_TRUE(m->consensus);
    ASSERT_TRUE(m->consensus->bootstrap(voters).is_ok());
    ASSERT_TRUE(m->consensus->start().is_ok());
  }
  ASSERT_TRUE(run_until([&] {
    if (!leader()) return false;
    for (auto& m : members_) {
      if (!m->consensus->leader() || m->consensus->leader()->id != *leader()) return false;
    }
    return true;
  }, 30s));
  RaftMember& lead = member(*leader());
  EXPECT_EQ(lead.consensus->leader()->address, lead.address);

  std::vector<std::string> proposed = {"one", "exactly8", "more-than-eight-bytes"};
  for (const std::string& command : proposed) {
    ASSERT_TRUE(lead.consensus->propose(command, [this](Result<LogIndex> r) {
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      committed_++;
    }).is_ok());
  }
  ASSERT_TRUE(run_until([&] {
    if (committed_ < 3) return false;
    for (auto& m : members_) {
      if (m->machine.commands != proposed) return false;
    }
    return true;
  }, 30s)) << "committed " << committed_ << "; applied: " << applied_text();

  // A fourth member without the secret: the leader cannot reach it, so it never catches up.
  RaftMember& stranger = add_member(4, secret_b());
  ASSERT_TRUE(stranger.consensus);
  ASSERT_TRUE(stranger.consensus->start().is_ok());
  ASSERT_TRUE(lead.consensus->add_server(4, stranger.address, Role::kVoter, [this](Status st) {
    if (!shutting_down_) added_ = std::move(st);
  }).is_ok());
  ASSERT_TRUE(lead.consensus->propose("four", [this](Result<LogIndex> r) {
    committed_ += r.is_ok() ? 1 : 0;
  }).is_ok());
  ASSERT_TRUE(run_until([&] {
    if (committed_ != 4) return false;
    for (ServerId id : {1, 2, 3}) {
      if (member(id).machine.commands.size() != 4) return false;
    }
    return true;
  }, 30s));
  run_for(1500ms);  // several heartbeats and connect retries
  EXPECT_TRUE(stranger.machine.commands.empty());
  EXPECT_EQ(stranger.consensus->applied_index(), 0u);
  if (added_) {
    EXPECT_FALSE(added_->is_ok()) << "the stranger was promoted";
  }
  for (auto& m : members_) {
    if (m->id == 4) continue;
    for (const Server& s : m->consensus->members()) {
      if (s.id == 4) {
        EXPECT_NE(s.role, Role::kVoter);
      }
    }
  }
}

TEST_F(RaftOverLinksTest, RaftMustRunAsTheLinksIdentity) {
  char tmpl[] = "/tmp/magnetar-link-raft-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto l = listener(secret_a(), 1);
  auto c = connector(secret_a(), 1, local(l->port()));
  {
    RaftLinkTransport transport(*l, *c);
    raft_io io{};
    ASSERT_EQ(raft_uv_init(&io, &loop_, dir.c_str(), transport.get()), 0);
    testing::LogMachine machine;
    auto wrong_id = RaftConsensus::create(&io, 2, local(l->port()), machine, {});
    EXPECT_FALSE(wrong_id.is_ok());
    auto wrong_address = RaftConsensus::create(&io, 1, "127.0.0.1:1", machine, {});
    EXPECT_FALSE(wrong_address.is_ok());
    if (!wrong_address.is_ok()) {
      EXPECT_NE(wrong_address.status().message().find("link identity"), std::string::npos)
          << wrong_address.status().to_string();
    }
    raft_uv_close(&io);
  }
  close_all(l.get(), c.get());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace magnetar::cluster
