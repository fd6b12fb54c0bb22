// RemoteLink: one Pulsar client connection from a replicator to a remote
// cluster, carrying one producer, on the replicator's reactor.
//
// The link speaks the client side of the Pulsar protocol: CONNECT, then
// PRODUCER on the topic, then SEND frames whose receipts it hands back by
// sequence id. It answers PING. Anything that ends the producer (an ERROR
// for it, SEND_ERROR, CLOSE_PRODUCER, the connection closing) ends the link:
// the listener hears link_failed once and the connection is closed.
//
// Threads: everything on the reactor that adopted the socket. The listener
// may be detached (set to null) before it goes away; the connection then
// closes and nothing is called back.
#pragma once

#include <cstdint>
#include <string>

#include "common/bytes.h"
#include "common/status.h"
#include "protocol/pulsar/frame.h"
#include "runtime/connection.h"

namespace magnetar::georep {

class LinkListener {
 public:
  virtual ~LinkListener() = default;
  virtual void link_ready() = 0;
  // The remote stored (or, deduplicating, had stored) the SEND with this
  // sequence id.
  virtual void link_receipt(uint64_t sequence_id) = 0;
  virtual void link_failed(const common::Status& why) = 0;
};

class RemoteLink final : public runtime::ConnectionHandler {
 public:
  RemoteLink(LinkListener* listener, std::string topic, std::string producer_name, std::string token);

  // Sends one stored Pulsar entry (checksum, metadata, payload) as SEND
  // `sequence_id`..`highest_sequence_id` of `messages` messages.
  // REQUIRES: ready().
  void send(uint64_t sequence_id, uint64_t highest_sequence_id, int32_t messages, const common::Slice& entry);
  bool ready() const { return ready_; }
  // Sends PING: the remote answers PONG, so a live link is heard from at
  // least once per ping.
  void ping();
  // When a frame last arrived (steady clock, ms); 0 before the first.
  int64_t last_heard_ms() const { return last_heard_ms_; }
  // Ends the link as a failure of the remote would (link_failed follows).
  void fail(const common::Status& why);
  // Forgets the listener and closes the connection.
  void detach();

  void on_open(runtime::Connection& conn) override;
  void on_data(runtime::Connection& conn, common::SliceChain& input) override;
  void on_close(runtime::Connection& conn, const common::Status& reason) override;

 private:
  LinkListener* listener_;
  const std::string topic_;
  const std::string producer_name_;
  const std::string token_;
  protocol::pulsar::FrameDecoder decoder_;
  bool decoder_broken_ = false;
  runtime::Connection* conn_ = nullptr;
  bool ready_ = false;
  bool failed_ = false;
  int64_t last_heard_ms_ = 0;
};

}  // namespace magnetar::georep
