#include "cluster/rpc.h"

#include <uv.h>

#include <cstring>
#include <utility>

#include "common/bytes.h"
#include "common/clock.h"
#include "common/logging.h"

namespace magnetar::cluster {

using common::Result;
using common::Status;

namespace {

constexpr size_t kReadChunk = 64 * 1024;

// One uv_write of a frame; owns its bytes until the write completed.
struct FrameWrite {
  uv_write_t req{};
  std::string bytes;
  std::shared_ptr<RpcChannel> channel;
};

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; i--) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_be(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

// ---- RpcChannel ----

RpcChannel::RpcChannel(uv_tcp_t* stream, std::string peer, FrameHandler on_frame, ClosedHandler on_closed)
    : stream_(stream), peer_(std::move(peer)), on_frame_(std::move(on_frame)), on_closed_(std::move(on_closed)) {}

RpcChannel::~RpcChannel() = default;

std::shared_ptr<RpcChannel> RpcChannel::adopt(uv_tcp_t* stream, std::string peer, FrameHandler on_frame,
                                              ClosedHandler on_closed) {
  std::shared_ptr<RpcChannel> channel(
      new RpcChannel(stream, std::move(peer), std::move(on_frame), std::move(on_closed)));
  channel->self_ = channel;
  stream->data = channel.get();
  uv_tcp_nodelay(stream, 1);
  int rv = uv_read_start(
      reinterpret_cast<uv_stream_t*>(stream),
      [](uv_handle_t*, size_t, uv_buf_t* buf) {
        buf->base = static_cast<char*>(std::malloc(kReadChunk));
        buf->len = buf->base ? kReadChunk : 0;
      },
      [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
        auto* self = static_cast<RpcChannel*>(s->data);
        self->on_read(n, buf);
        std::free(buf->base);
      });
  if (rv != 0) channel->close(Status::unavailable(std::string("cannot read from the link: ") + uv_strerror(rv)));
  return channel;
}

void RpcChannel::on_read(ssize_t n, const uv_buf_t* buf) {
  if (n == 0) return;
  if (n < 0) {
    close(n == UV_EOF ? Status::unavailable("the member closed the connection")
                      : Status::unavailable(std::string("link read failed: ") + uv_strerror(static_cast<int>(n))));
    return;
  }
  in_.append(buf->base, static_cast<size_t>(n));
  parse();
}

void RpcChannel::parse() {
  // A handler may close the channel: hold on to it until parsing stops.
  auto keep = shared_from_this();
  size_t at = 0;
  while (stream_ != nullptr && in_.size() - at >= rpc::kLengthBytes) {
    uint32_t length = static_cast<uint32_t>(get_be(in_.data() + at, 4));
    if (length > rpc::kMaxFrameBytes || length < rpc::kHeaderBytes - rpc::kLengthBytes) {
      close(Status::corruption("a frame of " + std::to_string(length) + " bytes from " + peer_));
      return;
    }
    if (in_.size() - at < rpc::kLengthBytes + length) break;
    const char* p = in_.data() + at + rpc::kLengthBytes;
    Frame frame;
    frame.call = get_be(p, 8);
    uint8_t kind = static_cast<uint8_t>(p[8]);
    if (kind != static_cast<uint8_t>(rpc::Kind::kRequest) && kind != static_cast<uint8_t>(rpc::Kind::kReply)) {
      close(Status::corruption("a frame of unknown kind " + std::to_string(kind) + " from " + peer_));
      return;
    }
    frame.kind = static_cast<rpc::Kind>(kind);
    frame.method = static_cast<rpc::Method>(get_be(p + 9, 2));
    size_t header_rest = rpc::kHeaderBytes - rpc::kLengthBytes;
    frame.payload = std::string_view(p + header_rest, length - header_rest);
    at += rpc::kLengthBytes + length;
    on_frame_(frame);
  }
  in_.erase(0, at);
}

bool RpcChannel::send(uint64_t call, rpc::Kind kind, rpc::Method method, std::string_view payload) {
  if (stream_ == nullptr) return false;
  if (queued_bytes_ > kMaxQueuedBytes) {
    close(Status::resource_exhausted("the member at " + peer_ + " stopped reading"));
    return false;
  }
  auto* write = new FrameWrite();
  write->bytes.reserve(rpc::kHeaderBytes + payload.size());
  put_be(write->bytes, rpc::kHeaderBytes - rpc::kLengthBytes + payload.size(), 4);
  put_be(write->bytes, call, 8);
  write->bytes.push_back(static_cast<char>(kind));
  put_be(write->bytes, static_cast<uint16_t>(method), 2);
  write->bytes.append(payload);
  write->channel = shared_from_this();
  write->req.data = write;
  queued_bytes_ += write->bytes.size();
  uv_buf_t buf = uv_buf_init(write->bytes.data(), static_cast<unsigned>(write->bytes.size()));
  int rv = uv_write(&write->req, reinterpret_cast<uv_stream_t*>(stream_), &buf, 1, [](uv_write_t* req, int status) {
    std::unique_ptr<FrameWrite> done(static_cast<FrameWrite*>(req->data));
    done->channel->queued_bytes_ -= done->bytes.size();
    if (status != 0 && status != UV_ECANCELED) {
      done->channel->close(Status::unavailable(std::string("link write failed: ") + uv_strerror(status)));
    }
  });
  if (rv != 0) {
    queued_bytes_ -= write->bytes.size();
    delete write;
    close(Status::unavailable(std::string("link write failed: ") + uv_strerror(rv)));
    return false;
  }
  return true;
}

void RpcChannel::close(const Status& why) {
  if (stream_ == nullptr) return;
  uv_tcp_t* stream = stream_;
  stream_ = nullptr;
  close_stream(stream);
  ClosedHandler closed = std::move(on_closed_);
  on_frame_ = nullptr;
  auto keep = std::move(self_);  // this may be the last reference: release it last
  if (closed) closed(why);
}

// ---- RpcServer ----

void RpcServer::handle(rpc::Method method, Handler handler) { handlers_[method] = std::move(handler); }

void RpcServer::accept(const Peer& peer, uv_tcp_t* stream) {
  std::string name = "server " + std::to_string(peer.id) + " at " + peer.address;
  if (channels_.size() >= kMaxChannels) {
    MLOG_WARN("cluster: refusing an RPC channel from {}: {} channels are open", name, channels_.size());
    close_stream(stream);
    return;
  }
  // Reading starts in adopt() but no frame arrives before the loop runs
  // again, by which time `self` names the channel.
  auto self = std::make_shared<std::weak_ptr<RpcChannel>>();
  auto channel = RpcChannel::adopt(
      stream, name,
      [this, peer, self](const RpcChannel::Frame& frame) {
        if (frame.kind != rpc::Kind::kRequest) return;  // nothing is called from this side
        auto it = handlers_.find(frame.method);
        std::weak_ptr<RpcChannel> channel = *self;
        uint64_t call = frame.call;
        rpc::Method method = frame.method;
        if (it == handlers_.end()) {
          if (auto c = channel.lock()) {
            c->close(Status::unimplemented("unknown method " + std::to_string(static_cast<int>(method))));
          }
          return;
        }
        it->second(peer, frame.payload, [channel, call, method](std::string payload) {
          if (auto c = channel.lock()) c->send(call, rpc::Kind::kReply, method, payload);
        });
      },
      [this, self](const Status&) {
        if (auto c = self->lock()) channels_.erase(c.get());
      });
  *self = channel;
  if (channel->is_open()) channels_[channel.get()] = channel;
}

void RpcServer::close() {
  auto channels = std::move(channels_);
  for (auto& [key, channel] : channels) channel->close(Status::unavailable("shutting down"));
}

}  // namespace magnetar::cluster

namespace magnetar::cluster {

// ---- RpcClient ----

RpcClient::RpcClient(runtime::Reactor& reactor, LinkConnector& connector)
    : reactor_(reactor), connector_(connector), sweeper_(std::make_unique<runtime::Timer>(reactor)) {
  sweeper_->every(std::chrono::milliseconds(100), [this]() { sweep(); });
}

RpcClient::~RpcClient() { close(); }

void RpcClient::finish(Done done, Result<std::string> outcome) {
  reactor_.defer([done = std::move(done), outcome = std::move(outcome)]() mutable { done(std::move(outcome)); });
}

void RpcClient::call(const std::string& address, rpc::Method method, std::string payload, Done done,
                     unsigned timeout_ms) {
  if (closed_) return finish(std::move(done), Status::unavailable("cluster calls: shutting down"));
  PeerState& peer = peers_[address];
  if (peer.calls.size() >= kMaxPendingPerPeer) {
    return finish(std::move(done), Status::resource_exhausted(std::to_string(peer.calls.size()) +
                                                              " calls already wait for the member at " + address));
  }
  uint64_t id = next_call_++;
  peer.calls.emplace(id, Pending{method, std::move(payload), std::move(done),
                                 static_cast<uint64_t>(common::monotonic_ms()) + timeout_ms, false});
  if (peer.channel && peer.channel->is_open()) {
    flush(peer);
  } else {
    connect(address);
  }
}

void RpcClient::connect(const std::string& address) {
  PeerState& peer = peers_[address];
  if (peer.connecting) return;
  peer.connecting = true;
  connector_.connect(address, Channel::kRpc, [this, address](Result<uv_tcp_t*> stream) {
    auto it = peers_.find(address);
    if (it == peers_.end()) {
      if (stream.is_ok()) close_stream(*stream);
      return;
    }
    PeerState& peer = it->second;
    peer.connecting = false;
    if (!stream.is_ok()) {
      fail_all(peer, Status(stream.status().code(), "cannot reach the member at " + address + ": " +
                                                         stream.status().message()));
      return;
    }
    if (closed_) {
      close_stream(*stream);
      return;
    }
    peer.channel = RpcChannel::adopt(
        *stream, address,
        [this, address](const RpcChannel::Frame& frame) {
          if (frame.kind != rpc::Kind::kReply) return;
          auto peer_it = peers_.find(address);
          if (peer_it == peers_.end()) return;
          auto call_it = peer_it->second.calls.find(frame.call);
          if (call_it == peer_it->second.calls.end()) return;  // timed out already
          Done done = std::move(call_it->second.done);
          peer_it->second.calls.erase(call_it);
          finish(std::move(done), std::string(frame.payload));
        },
        [this, address](const Status& why) {
          auto peer_it = peers_.find(address);
          if (peer_it == peers_.end()) return;
          peer_it->second.channel.reset();
          fail_all(peer_it->second, why);
        });
    flush(peer);
  });
}

void RpcClient::flush(PeerState& peer) {
  for (auto& [id, pending] : peer.calls) {
    if (pending.sent) continue;
    if (!peer.channel || !peer.channel->is_open()) return;
    pending.sent = peer.channel->send(id, rpc::Kind::kRequest, pending.method, pending.payload);
    if (!pending.sent) return;  // the channel closed: its closed handler failed every call
    pending.payload.clear();
    pending.payload.shrink_to_fit();
  }
}

void RpcClient::fail_all(PeerState& peer, const Status& why) {
  auto calls = std::move(peer.calls);
  peer.calls.clear();
  for (auto& [id, pending] : calls) {
    if (pending.sent) {
      finish(std::move(pending.done), Status::timeout("no reply from the member (" + why.message() +
                                                      "): the call may or may not have taken effect"));
    } else if (why.code() == common::ErrorCode::kPermissionDenied) {
      finish(std::move(pending.done), why);  // retrying cannot help
    } else {
      finish(std::move(pending.done), Status::unavailable(why.message()));
    }
  }
}

void RpcClient::sweep() {
  uint64_t now = static_cast<uint64_t>(common::monotonic_ms());
  for (auto& [address, peer] : peers_) {
    for (auto it = peer.calls.begin(); it != peer.calls.end();) {
      if (it->second.deadline_ms > now) {
        ++it;
        continue;
      }
      Status why = it->second.sent ? Status::timeout("the member at " + address +
                                                     " did not answer in time: the call may or may not have taken effect")
                                   : Status::unavailable("could not reach the member at " + address + " in time");
      finish(std::move(it->second.done), why);
      it = peer.calls.erase(it);
    }
  }
}

void RpcClient::close() {
  if (closed_) return;
  closed_ = true;
  sweeper_.reset();
  for (auto& [address, peer] : peers_) {
    if (peer.channel) peer.channel->close(Status::unavailable("shutting down"));
    fail_all(peer, Status::unavailable("shutting down"));
  }
}

}  // namespace magnetar::cluster
