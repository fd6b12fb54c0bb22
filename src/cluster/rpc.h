// Calls between members over the cluster port's RPC channel.
//
// RpcChannel frames one authenticated stream (link.h) both ways
// (rpc_format.h). RpcServer answers the requests arriving on accepted
// channels with the handler registered for their method. RpcClient calls
// other members by address, over one channel per member that it opens on
// first use and opens again after it breaks.
//
// A call's outcome tells the caller whether the request may have reached the
// peer: Unavailable means it was never sent (no connection, this client is
// closing) and is safe to retry; Timeout means it was sent and no reply came
// (the connection broke or the peer is slow): whatever it asked may or may
// not have happened.
//
// Threads: everything on the reactor whose loop the links run on; not
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/link.h"
#include "cluster/rpc_format.h"
#include "common/result.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"

namespace magnetar::cluster {

class RpcChannel : public std::enable_shared_from_this<RpcChannel> {
 public:
  struct Frame {
    uint64_t call = 0;
    rpc::Kind kind = rpc::Kind::kRequest;
    rpc::Method method = rpc::Method::kMetadata;
    std::string_view payload;  // valid during the handler only
  };
  using FrameHandler = std::function<void(const Frame&)>;
  using ClosedHandler = std::function<void(const common::Status& why)>;

  // Takes `stream` (an authenticated link) and starts reading it. `on_frame`
  // gets each whole frame; `on_closed` runs once when the channel closes
  // (the peer left, a malformed frame, close()).
  static std::shared_ptr<RpcChannel> adopt(uv_tcp_t* stream, std::string peer, FrameHandler on_frame,
                                           ClosedHandler on_closed);
  ~RpcChannel();

  // Queues one frame. False when the channel is closed or the peer stopped
  // reading (more than kMaxQueuedBytes unsent): the channel closes then.
  bool send(uint64_t call, rpc::Kind kind, rpc::Method method, std::string_view payload);
  void close(const common::Status& why);
  bool is_open() const { return stream_ != nullptr; }
  const std::string& peer() const { return peer_; }

  static constexpr size_t kMaxQueuedBytes = 64u << 20;

 private:
  RpcChannel(uv_tcp_t* stream, std::string peer, FrameHandler on_frame, ClosedHandler on_closed);
  void on_read(ssize_t n, const uv_buf_t* buf);
  void parse();

  uv_tcp_t* stream_;
  std::string peer_;
  FrameHandler on_frame_;
  ClosedHandler on_closed_;
  std::string in_;            // bytes received and not yet framed
  size_t queued_bytes_ = 0;   // written, not yet completed
  std::shared_ptr<RpcChannel> self_;  // keeps this alive while the stream is open
};

class RpcServer {
 public:
  // Sends the reply payload back on the channel the request came on (dropped
  // when it closed meanwhile).
  using Reply = std::function<void(std::string payload)>;
  using Handler = std::function<void(const Peer& peer, std::string_view payload, Reply reply)>;

  // At most this many channels from other members at once; more are refused.
  static constexpr size_t kMaxChannels = 1024;

  void handle(rpc::Method method, Handler handler);
  // For LinkListener::set_handler(Channel::kRpc, ...).
  void accept(const Peer& peer, uv_tcp_t* stream);
  void close();

 private:
  std::map<rpc::Method, Handler> handlers_;
  std::map<RpcChannel*, std::shared_ptr<RpcChannel>> channels_;
};

class RpcClient {
 public:
  using Done = std::function<void(common::Result<std::string>)>;

  // At most this many calls wait for one member (connecting or unanswered);
  // more answer ResourceExhausted at once.
  static constexpr size_t kMaxPendingPerPeer = 4096;

  // `connector` runs on `reactor`'s loop.
  RpcClient(runtime::Reactor& reactor, LinkConnector& connector);
  ~RpcClient();

  // Calls `method` on the member at `address`; `done` runs exactly once, never
  // inline, with the reply payload or an error (see the header comment).
  void call(const std::string& address, rpc::Method method, std::string payload, Done done,
            unsigned timeout_ms = 10000);
  // Fails every pending call with Unavailable (or Timeout, for those sent) and
  // closes the channels.
  void close();

 private:
  struct Pending {
    rpc::Method method;
    std::string payload;  // kept until sent
    Done done;
    uint64_t deadline_ms = 0;
    bool sent = false;
  };
  struct PeerState {
    std::shared_ptr<RpcChannel> channel;
    bool connecting = false;
    std::map<uint64_t, Pending> calls;  // by call number
  };

  void connect(const std::string& address);
  void flush(PeerState& peer);
  void fail_all(PeerState& peer, const common::Status& why);
  void sweep();  // times out calls past their deadline
  void finish(Done done, common::Result<std::string> outcome);

  runtime::Reactor& reactor_;
  LinkConnector& connector_;
  std::map<std::string, PeerState> peers_;
  uint64_t next_call_ = 1;
  std::unique_ptr<runtime::Timer> sweeper_;
  bool closed_ = false;
};

}  // namespace magnetar::cluster
