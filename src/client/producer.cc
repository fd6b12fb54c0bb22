#include "client/producer.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/clock.h"
#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::client {

using common::Result;
using common::Slice;
using common::Status;
namespace pp = protocol::pulsar;
namespace proto = protocol::pulsar::proto;
using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<Producer>> Producer::create(const std::string& service_url, ProducerOptions options,
                                                   ClientOptions client_options) {
  if (options.max_pending_messages == 0) return Status::invalid_argument("max_pending_messages must be at least 1");
  auto client = PulsarClient::connect(service_url, client_options);
  if (!client) return client.status();
  auto id = (*client)->create_producer(options.topic, options.name);
  if (!id) return id.status();
  std::unique_ptr<Producer> p(new Producer(std::move(*client), *id, std::move(options)));
  p->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (p->wake_fd_ < 0) return Status::from_errno(errno, "eventfd");
  p->io_ = std::thread([raw = p.get()] { raw->io_loop(); });
  return p;
}

Producer::Producer(std::unique_ptr<PulsarClient> client, uint64_t producer_id, ProducerOptions options)
    : client_(std::move(client)),
      producer_id_(producer_id),
      options_(std::move(options)),
      batch_(options_.batch) {
  name_ = client_->producer_names_[producer_id_];
  next_sequence_ = client_->sequence_[producer_id_];
}

Producer::~Producer() {
  (void)close();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

uint64_t Producer::pending() const {
  std::lock_guard lock(mu_);
  return pending_messages_ + static_cast<uint64_t>(batch_.count());
}

void Producer::wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

Result<Slice> Producer::send_frame(uint64_t sequence_id, int32_t count, bool batched, std::string_view payload,
                                   const OutgoingMessage* single) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::SEND);
  auto* send = cmd.mutable_send();
  send->set_producer_id(producer_id_);
  send->set_sequence_id(sequence_id);
  if (batched) {
    send->set_num_messages(count);
    send->set_highest_sequence_id(sequence_id + static_cast<uint64_t>(count) - 1);
  }
  proto::MessageMetadata md;
  md.set_producer_name(name_);
  md.set_sequence_id(sequence_id);
  md.set_publish_time(static_cast<uint64_t>(common::wall_clock_ms()));
  if (batched) {
    md.set_num_messages_in_batch(count);
    md.set_highest_sequence_id(sequence_id + static_cast<uint64_t>(count) - 1);
  } else if (single != nullptr) {
    if (!single->key.empty()) md.set_partition_key(std::string(single->key));
    if (single->properties != nullptr) {
      for (const auto& [k, v] : *single->properties) {
        auto* kv = md.add_properties();
        kv->set_key(k);
        kv->set_value(v);
      }
    }
    if (single->event_time_ms != 0) md.set_event_time(single->event_time_ms);
  }
  if (options_.compression != proto::NONE) {
    auto packed = compress(options_.compression, payload);
    if (!packed) return packed.status();
    md.set_compression(options_.compression);
    md.set_uncompressed_size(static_cast<uint32_t>(payload.size()));
    return pp::encode_payload_command(cmd, md, packed->view());
  }
  return pp::encode_payload_command(cmd, md, payload);
}

Result<Producer::Outgoing> Producer::seal_locked(Clock::time_point now) {
  auto sealed = batch_.seal();
  InFlight f;
  f.sequence_id = next_sequence_;
  f.count = sealed.count;
  f.batched = true;
  f.sent = now;
  f.callbacks = std::move(sealed.callbacks);
  auto frame = send_frame(f.sequence_id, f.count, true, sealed.payload.view(), nullptr);
  if (!frame) return frame.status();
  next_sequence_ += static_cast<uint64_t>(f.count);
  pending_messages_ += static_cast<uint64_t>(f.count);
  in_flight_.push_back(std::move(f));
  return Outgoing{std::move(*frame), next_ticket_++};
}

Status Producer::write_in_order(std::unique_lock<std::mutex>& lock, Outgoing out) {
  lock.unlock();
  std::unique_lock w(write_mu_);
  write_turn_.wait(w, [&] { return serving_ticket_ == out.ticket; });
  Status st = client_->write_all(out.frame);
  ++serving_ticket_;
  w.unlock();
  write_turn_.notify_all();
  if (!st.is_ok()) {
    fail_all(st);
    wake();
  }
  return st;
}

Status Producer::send_async(const OutgoingMessage& message, SendCallback done) {
  std::unique_lock lock(mu_);
  auto deadline = Clock::now() + options_.send_timeout;
  // Room counts the open batch too, so max_pending bounds what is buffered.
  auto has_room = [&] {
    return !broken_.is_ok() || closing_ ||
           pending_messages_ + static_cast<uint64_t>(batch_.count()) < options_.max_pending_messages;
  };
  if (!room_.wait_until(lock, deadline, has_room)) {
    return Status::timeout("no room for another message: " + std::to_string(options_.max_pending_messages) +
                           " wait for receipts");
  }
  if (!broken_.is_ok()) return broken_;
  if (closing_) return Status::failed_precondition("the producer is closed");
  auto now = Clock::now();
  if (!options_.batching) {
    InFlight f;
    f.sequence_id = next_sequence_;
    f.count = 1;
    f.sent = now;
    auto frame = send_frame(f.sequence_id, 1, false, message.payload, &message);
    if (!frame) return frame.status();
    f.callbacks.push_back(std::move(done));
    ++next_sequence_;
    ++pending_messages_;
    in_flight_.push_back(std::move(f));
    (void)write_in_order(lock, Outgoing{std::move(*frame), next_ticket_++});
    return Status::ok();
  }
  if (!batch_.has_room(message.payload.size())) {
    auto out = seal_locked(now);
    if (!out) return out.status();
    (void)write_in_order(lock, std::move(*out));
    lock.lock();
    if (!broken_.is_ok()) return broken_;
  }
  bool was_empty = batch_.empty();
  batch_.add(message, std::move(done), now);
  if (batch_.full()) {
    auto out = seal_locked(now);
    if (!out) return out.status();
    (void)write_in_order(lock, std::move(*out));
    return Status::ok();
  }
  lock.unlock();
  if (was_empty) wake();  // the I/O thread arms the batch's timer
  return Status::ok();
}

Result<MessageId> Producer::send(const OutgoingMessage& message) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  Result<MessageId> result = Status::internal("no answer");
  MAGNETAR_RETURN_IF_ERROR(send_async(message, [&](Result<MessageId> r) {
    std::lock_guard g(m);
    result = std::move(r);
    done = true;
    cv.notify_all();
  }));
  {
    std::unique_lock lock(mu_);
    if (!batch_.empty()) {
      auto out = seal_locked(Clock::now());
      if (!out) return out.status();
      (void)write_in_order(lock, std::move(*out));
    }
  }
  std::unique_lock g(m);
  if (!cv.wait_for(g, options_.send_timeout + std::chrono::seconds(1), [&] { return done; })) {
    return Status::timeout("no receipt from the broker in time");
  }
  return result;
}

Status Producer::flush() {
  std::unique_lock lock(mu_);
  if (!batch_.empty() && broken_.is_ok()) {
    auto out = seal_locked(Clock::now());
    if (!out) return out.status();
    (void)write_in_order(lock, std::move(*out));
    lock.lock();
  }
  if (!room_.wait_for(lock, options_.send_timeout, [&] { return pending_messages_ == 0 || !broken_.is_ok(); })) {
    return Status::timeout("messages still wait for receipts");
  }
  return broken_;
}

Status Producer::close() {
  if (!io_.joinable()) return Status::ok();
  Status flushed = flush();
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  stop_.store(true);
  wake();
  io_.join();
  fail_all(Status::failed_precondition("the producer is closed"));
  Status st = Status::ok();
  if (flushed.is_ok()) st = client_->close_producer(producer_id_);
  return flushed.is_ok() ? st : flushed;
}

void Producer::fail_all(const Status& why) {
  std::deque<InFlight> failed;
  BatchContainer::Sealed open;
  {
    std::lock_guard lock(mu_);
    if (broken_.is_ok()) broken_ = why;
    failed.swap(in_flight_);
    if (!batch_.empty()) open = batch_.seal();
    pending_messages_ = 0;
  }
  room_.notify_all();
  for (auto& f : failed) {
    for (auto& cb : f.callbacks) cb(why);
  }
  for (auto& cb : open.callbacks) cb(why);
}

void Producer::on_receipt(const proto::BaseCommand& c) {
  bool ok = c.type() == proto::BaseCommand::SEND_RECEIPT;
  uint64_t sequence = ok ? c.send_receipt().sequence_id() : c.send_error().sequence_id();
  InFlight f;
  {
    std::lock_guard lock(mu_);
    // Receipts come in send order; one for an older batch than the first in
    // flight is a duplicate.
    if (in_flight_.empty() || in_flight_.front().sequence_id != sequence) return;
    f = std::move(in_flight_.front());
    in_flight_.pop_front();
    pending_messages_ -= static_cast<uint64_t>(f.count);
  }
  room_.notify_all();
  if (options_.on_round_trip) options_.on_round_trip(Clock::now() - f.sent);
  if (!ok) {
    Status st = Status::failed_precondition("the broker refused: " + c.send_error().message());
    for (auto& cb : f.callbacks) cb(st);
    return;
  }
  const auto& id = c.send_receipt().message_id();
  for (size_t i = 0; i < f.callbacks.size(); ++i) {
    f.callbacks[i](MessageId{id.ledgerid(), id.entryid(), f.batched ? static_cast<int32_t>(i) : -1});
  }
}

void Producer::io_loop() {
  Transport& transport = *client_->transport_;
  const int fd = transport.fd();
  std::vector<Slice> buffers;
  while (!stop_.load()) {
    // Sleep until the open batch is due, or a receipt or a wake-up arrives.
    int timeout_ms = 200;
    Clock::time_point due{};
    {
      std::unique_lock lock(mu_);
      auto now = Clock::now();
      if (!batch_.empty()) {
        due = batch_.deadline();
        if (due <= now) {
          auto out = seal_locked(now);
          if (out) (void)write_in_order(lock, std::move(*out));
          continue;
        }
      }
      if (!in_flight_.empty() && now - in_flight_.front().sent > options_.send_timeout) {
        lock.unlock();
        fail_all(Status::timeout("no receipt from the broker within the send timeout"));
        continue;
      }
    }
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int rc;
    if (transport.has_buffered()) {
      // TLS already holds bytes the socket no longer shows: read them now.
      (void)::poll(fds, 2, 0);  // for the wake-up fd
      fds[0].revents |= POLLIN;
      rc = 1;
    } else if (due != Clock::time_point{}) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(due - Clock::now()).count();
      timespec ts{static_cast<time_t>(left / 1000000), static_cast<long>((left % 1000000) * 1000)};
      if (left < 0) ts = {0, 0};
      rc = ::ppoll(fds, 2, &ts, nullptr);
    } else {
      rc = ::poll(fds, 2, timeout_ms);
    }
    if (rc < 0 && errno != EINTR) {
      fail_all(Status::from_errno(errno, "poll"));
      return;
    }
    if (rc <= 0) continue;
    if (fds[1].revents & POLLIN) {
      uint64_t n;
      (void)!::read(wake_fd_, &n, sizeof(n));
    }
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Slice buf = Slice::allocate(256 << 10);
    auto n = transport.read_some(buf.mutable_data(), buf.size());
    if (!n.is_ok()) {
      fail_all(Status::unavailable("the broker closed the connection (" + n.status().message() + ")"));
      return;
    }
    if (*n == 0) continue;
    buf.truncate(*n);
    client_->input_.append(std::move(buf));
    for (;;) {
      pp::Frame frame;
      auto r = client_->decoder_.decode(client_->input_, &frame);
      if (r == pp::DecodeResult::kNeedMore) break;
      if (r != pp::DecodeResult::kFrame) {
        fail_all(Status::corruption("the broker sent a frame we cannot read: " + client_->decoder_.status().message()));
        return;
      }
      switch (frame.command.type()) {
        case proto::BaseCommand::SEND_RECEIPT:
        case proto::BaseCommand::SEND_ERROR:
          on_receipt(frame.command);
          break;
        case proto::BaseCommand::PING: {
          std::unique_lock lock(mu_);
          (void)write_in_order(lock, Outgoing{pp::encode_command(pp::commands::pong()), next_ticket_++});
          break;
        }
        case proto::BaseCommand::CLOSE_PRODUCER:
          fail_all(Status::unavailable("the broker closed the producer"));
          return;
        default:
          // Answers to requests made before the I/O thread started, kept for close().
          client_->pending_.push_back(std::move(frame));
      }
    }
  }
}

}  // namespace magnetar::client
