#include "georep/replicator.h"

#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/logging.h"
#include "georep/geo_replication.h"
#include "protocol/pulsar/frame.h"
#include "runtime/connection.h"
#include "runtime/reactor.h"

namespace magnetar::georep {

namespace pp = protocol::pulsar;
using common::Result;
using common::Status;

Replicator::Replicator(broker::Topic& topic, std::string remote_cluster, GeoReplication& service)
    : topic_(topic), remote_(std::move(remote_cluster)), service_(service), topic_name_(topic.name().to_string()),
      backoff_(service.options().min_backoff), retry_timer_(*runtime::Reactor::current()),
      keepalive_timer_(*runtime::Reactor::current()), acks_timer_(*runtime::Reactor::current()) {}

Replicator::~Replicator() {
  *alive_ = false;
  if (link_ != nullptr) link_->detach();
}

void Replicator::start() {
  std::weak_ptr<bool> alive = alive_;
  topic_.log().open_cursor(cursor_name(), true, ledger::Log::CursorStart::kEarliest,
                           [this, alive](Result<ledger::Cursor*> c) {
                             if (alive.expired()) return;
                             if (!c.is_ok()) {
                               last_error_ = "cannot open the replication cursor: " + c.status().message();
                               MLOG_WARN("topic {}: replication to {}: {}", topic_name_, remote_, last_error_);
                               retry_timer_.once(service_.options().max_backoff, [this]() { start(); });
                               return;
                             }
                             cursor_ = *c;
                             read_after_ = cursor_->mark_delete_position();
                             keepalive_timer_.every(service_.options().keepalive, [this]() { keep_alive(); });
                             if (service_.options().subscription_sync_interval.count() > 0) {
                               acks_timer_.every(service_.options().subscription_sync_interval,
                                                 [this]() { send_acks(); });
                             }
                             connect();
                           });
}

void Replicator::connect() {
  if (connecting_ || link_ != nullptr) return;
  connecting_ = true;
  std::weak_ptr<bool> alive = alive_;
  runtime::Reactor& home = *runtime::Reactor::current();
  service_.connect(remote_, topic_name_, home, [this, alive, &home](Result<GeoReplication::RemoteSocket> socket) {
    if (alive.expired()) {
      if (socket.is_ok()) ::close(socket->fd);
      return;
    }
    connecting_ = false;
    if (!socket.is_ok()) return retry_later(socket.status());
    std::string producer = std::string(broker::kReplicatorPrefix) + service_.options().local_cluster;
    auto handler = std::make_unique<RemoteLink>(this, topic_name_, std::move(producer), std::move(socket->token));
    link_ = handler.get();
    runtime::ConnectionOptions options;
    options.tls_client = socket->tls;
    options.tls_server_name = socket->server_name;
    if (runtime::Connection::adopt(home, socket->fd, std::move(handler), std::move(options)) == nullptr) {
      link_ = nullptr;
      retry_later(Status::unavailable("cannot use the socket to the remote cluster"));
    }
  });
}

void Replicator::keep_alive() {
  if (link_ == nullptr) return;
  const int64_t silent = common::monotonic_ms() - link_->last_heard_ms();
  if (silent > 3 * service_.options().keepalive.count()) {
    link_->fail(Status::timeout("no answer from the remote cluster for " + std::to_string(silent) + " ms"));
    return;
  }
  link_->ping();
}

void Replicator::note_oldest_pending() {
  if (cursor_ == nullptr || oldest_pending_ms_ != 0 || backlog_messages() == 0) return;
  std::weak_ptr<bool> alive = alive_;
  topic_.log().read_entries(cursor_->mark_delete_position(), 1,
                            [this, alive](Result<std::vector<ledger::LedgerEntry>> r) {
                              if (alive.expired() || !r.is_ok() || r->empty() || oldest_pending_ms_ != 0) return;
                              oldest_pending_ms_ = r->front().header.publish_time_ms;
                            });
}

void Replicator::retry_later(const Status& why) {
  note_oldest_pending();  // the delay keeps growing while the link is down
  last_error_ = why.message();
  MLOG_INFO("topic {}: replication to {} waits {} ms: {}", topic_name_, remote_, backoff_.count(), why.message());
  retry_timer_.once(backoff_, [this]() { connect(); });
  backoff_ = std::min(backoff_ * 2, service_.options().max_backoff);
}

void Replicator::link_ready() {
  backoff_ = service_.options().min_backoff;
  last_error_.clear();
  pump();
}

void Replicator::link_failed(const Status& why) {
  link_ = nullptr;
  ++epoch_;
  if (!in_flight_.empty()) oldest_pending_ms_ = in_flight_.front().publish_ms;
  in_flight_.clear();
  in_flight_bytes_ = 0;
  // What was in flight is read again; the remote drops what it stored already.
  if (cursor_ != nullptr) read_after_ = cursor_->mark_delete_position();
  retry_later(why);
}

void Replicator::pump() {
  if (cursor_ == nullptr || link_ == nullptr || !link_->ready()) return;
  if (reading_) {
    wake_ = true;
    return;
  }
  const size_t max = service_.options().max_in_flight;
  if (in_flight_.size() >= max || in_flight_bytes_ >= service_.options().max_in_flight_bytes) return;
  reading_ = true;
  wake_ = false;
  const uint64_t epoch = epoch_;
  std::weak_ptr<bool> alive = alive_;
  topic_.log().read_entries(read_after_, std::min(max - in_flight_.size(), service_.options().read_batch),
                            [this, alive, epoch](Result<std::vector<ledger::LedgerEntry>> r) {
                              if (alive.expired()) return;
                              reading_ = false;
                              if (epoch != epoch_) return pump();
                              if (!r.is_ok()) {
                                last_error_ = "cannot read the topic: " + r.status().message();
                                MLOG_WARN("topic {}: replication to {}: {}", topic_name_, remote_, last_error_);
                                retry_timer_.once(service_.options().max_backoff, [this]() { pump(); });
                                return;
                              }
                              if (r->empty()) {
                                if (wake_) pump();
                                return;
                              }
                              send_entries(std::move(*r));
                              pump();
                            });
}

void Replicator::send_entries(std::vector<ledger::LedgerEntry> entries) {
  const std::string& local = service_.options().local_cluster;
  for (auto& e : entries) {
    read_after_ = e.position;
    InFlight f;
    f.position = e.position;
    f.publish_ms = e.header.publish_time_ms;
    f.messages = e.header.messages;
    f.bytes = e.payload.size();
    if (oldest_pending_ms_ == 0) oldest_pending_ms_ = f.publish_ms;
    in_flight_bytes_ += f.bytes;
    pp::proto::MessageMetadata md;
    common::Slice payload;
    Status st = pp::parse_entry(e.payload, false, &md, &payload);
    bool skip = !st.is_ok() || md.has_replicated_from();
    if (st.is_ok() && md.has_replicated_from() && md.replicated_from() == remote_) {
      sample(e.header.sequence_id + std::max<int64_t>(e.header.messages, 1) - 1, e.position);
    } else if (!last_other_ || *last_other_ < e.position) {
      last_other_ = e.position;  // a link failure reads older entries again
    }
    if (st.is_ok() && md.replicate_to_size() > 0) {
      skip = skip || std::find(md.replicate_to().begin(), md.replicate_to().end(), remote_) == md.replicate_to().end();
    }
    if (!st.is_ok()) {
      MLOG_WARN("topic {}: entry {} cannot be replicated to {}: {}", topic_name_, e.position.to_string(), remote_,
                st.message());
    }
    if (skip) {
      f.done = true;
      in_flight_.push_back(f);
      continue;
    }
    md.set_replicated_from(local);
    auto* origin = md.add_properties();
    origin->set_key(std::string(kOriginPositionProperty));
    origin->set_value(e.position.to_string());
    const auto first = static_cast<uint64_t>(e.header.first_index);
    const uint64_t highest = first + std::max<uint32_t>(e.header.messages, 1) - 1;
    f.sequence_id = first;
    f.sent = true;
    link_->send(first, highest, static_cast<int32_t>(e.header.messages), pp::encode_entry(md, payload.view()));
    in_flight_.push_back(f);
  }
  ack_front();
}

void Replicator::link_receipt(uint64_t sequence_id) {
  // Receipts come in the order of the SENDs: the first sent entry not yet
  // acknowledged is the one.
  for (auto& f : in_flight_) {
    if (f.done) continue;
    if (f.sequence_id != sequence_id) {
      MLOG_WARN("topic {}: replication to {}: receipt for {} while {} was expected", topic_name_, remote_,
                sequence_id, f.sequence_id);
      return;
    }
    f.done = true;
    messages_out_ += f.messages;
    bytes_out_ += f.bytes;
    break;
  }
  ack_front();
  pump();
}

void Replicator::ack_front() {
  bool moved = false;
  ledger::Position last;
  while (!in_flight_.empty() && in_flight_.front().done) {
    last = in_flight_.front().position;
    in_flight_bytes_ -= in_flight_.front().bytes;
    in_flight_.pop_front();
    moved = true;
  }
  if (moved && cursor_ != nullptr) {
    Status st = topic_.log().ack_cumulative(cursor_name(), last);
    if (!st.is_ok()) MLOG_WARN("topic {}: replication cursor to {}: {}", topic_name_, remote_, st.to_string());
  }
  oldest_pending_ms_ = in_flight_.empty() ? 0 : in_flight_.front().publish_ms;
}

void Replicator::sample(int64_t remote_index, ledger::Position at) {
  if (!samples_.empty() && samples_.back().remote_index >= remote_index) return;  // read again after a failure
  if (samples_.size() >= kMaxSamples) {
    // Every other one goes: older spans get coarser, the newest stays.
    std::deque<Sample> kept;
    for (size_t i = samples_.size() % 2; i < samples_.size(); i += 2) kept.push_back(samples_[i]);
    samples_.swap(kept);
  }
  samples_.push_back(Sample{remote_index, at, last_other_});
}

std::optional<int64_t> Replicator::remote_index_through(ledger::Position p) const {
  std::optional<int64_t> index;
  for (const Sample& s : samples_) {
    if (p < s.local) break;
    index = s.remote_index;
  }
  return index;
}

std::optional<ledger::Position> Replicator::consumed_through(const std::string& cluster, int64_t origin_index,
                                                             std::optional<ledger::Position> covered) const {
  if (cluster != remote_) return std::nullopt;
  std::optional<ledger::Position> through;
  for (const Sample& s : samples_) {
    if (s.remote_index > origin_index) break;
    // Entries from elsewhere before it must be consumed there too.
    if (s.other && (!covered || *covered < *s.other)) continue;
    through = s.local;
  }
  return through;
}

void Replicator::send_acks() {
  if (acks_in_flight_ || topic_.closed()) return;
  // Subscriptions gone or no longer replicated are forgotten.
  for (auto it = acks_sent_.begin(); it != acks_sent_.end();) {
    const broker::Subscription* sub = topic_.subscription(it->first);
    it = sub == nullptr || !sub->cursor().replicated() ? acks_sent_.erase(it) : std::next(it);
  }
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::pair<std::string, ledger::Position>> sent;
  for (const auto& [name, sub] : topic_.subscriptions()) {
    const ledger::Cursor& cursor = sub.cursor();
    if (!cursor.replicated()) continue;
    const ledger::Position md = cursor.mark_delete_position();
    auto was = acks_sent_.find(name);
    if (was != acks_sent_.end() && was->second == md) continue;
    auto origin = topic_.last_index_at(md);
    if (!origin) continue;
    auto local = sole_remote_ ? remote_index_through(md) : std::nullopt;
    list.push_back({{"name", name}, {"originIndex", *origin}, {"localIndex", local.value_or(-1)}});
    sent.emplace_back(name, md);
  }
  if (sent.empty()) return;
  acks_in_flight_ = true;
  std::weak_ptr<bool> alive = alive_;
  const nlohmann::json body{{"cluster", service_.options().local_cluster}, {"subscriptions", std::move(list)}};
  auto answered = [this, alive, sent = std::move(sent)](Status st) {
    if (alive.expired()) return;
    acks_in_flight_ = false;
    // Logged when it changes: a link that keeps failing says so once.
    const std::string why = st.is_ok() ? std::string() : st.to_string();
    if (why != acks_error_) {
      if (why.empty()) {
        MLOG_INFO("topic {}: subscription acknowledgements reach {} again", topic_name_, remote_);
      } else {
        MLOG_WARN("topic {}: subscription acknowledgements cannot be sent to {}: {}", topic_name_, remote_, why);
      }
      acks_error_ = why;
    }
    if (!st.is_ok()) return;
    for (const auto& [name, md] : sent) acks_sent_[name] = md;
  };
  service_.send_acks(remote_, topic_.name(), body.dump(), *runtime::Reactor::current(), std::move(answered));
}

uint64_t Replicator::backlog_messages() const {
  return cursor_ == nullptr ? 0 : cursor_->backlog_messages(topic_.log().chain());
}

bool Replicator::busy() const { return !in_flight_.empty() || backlog_messages() > 0; }

void Replicator::add_stats(broker::TopicStats& stats) const {
  broker::ReplicatorStats r;
  r.cluster = remote_;
  r.connected = link_ != nullptr && link_->ready();
  r.backlog_messages = backlog_messages();
  r.messages_out = messages_out_;
  r.bytes_out = bytes_out_;
  if (oldest_pending_ms_ > 0 && r.backlog_messages > 0) {
    r.delay_seconds = std::max<int64_t>(0, common::wall_clock_ms() - oldest_pending_ms_) / 1000.0;
  }
  r.last_error = last_error_;
  stats.replication.push_back(std::move(r));
}

}  // namespace magnetar::georep
