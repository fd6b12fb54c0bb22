#include "client/batch_container.h"

namespace magnetar::client {

namespace proto = protocol::pulsar::proto;

bool BatchContainer::has_room(size_t payload_bytes) const {
  if (empty()) return true;
  if (static_cast<uint32_t>(builder_.count()) >= limits_.max_messages) return false;
  return builder_.size_bytes() + payload_bytes <= limits_.max_bytes;
}

bool BatchContainer::full() const {
  return static_cast<uint32_t>(builder_.count()) >= limits_.max_messages || builder_.size_bytes() >= limits_.max_bytes;
}

void BatchContainer::add(const OutgoingMessage& m, SendCallback done, Clock::time_point now) {
  if (empty()) first_added_ = now;
  proto::SingleMessageMetadata md;
  if (!m.key.empty()) md.set_partition_key(std::string(m.key));
  if (m.properties != nullptr) {
    for (const auto& [k, v] : *m.properties) {
      auto* kv = md.add_properties();
      kv->set_key(k);
      kv->set_value(v);
    }
  }
  if (m.event_time_ms != 0) md.set_event_time(m.event_time_ms);
  builder_.add(std::move(md), m.payload);
  callbacks_.push_back(std::move(done));
}

BatchContainer::Sealed BatchContainer::seal() {
  Sealed s;
  s.count = builder_.count();
  s.payload = builder_.finish();
  s.callbacks = std::move(callbacks_);
  callbacks_.clear();
  callbacks_.reserve(static_cast<size_t>(s.count));
  return s;
}

}  // namespace magnetar::client
