// DeliveryCredit: a connection's side of one consumer's delivery credit
// (broker/consumer.h): the bytes of entries the broker may hand the
// consumer before the connection gives it more.
//
// Permits are a client's promise to take messages, not proof that it reads
// them: a client that grants millions and leaves its socket unread would
// have the broker dispatch all of them into the connection's output. So
// the consumer is attached with a credit of `window` bytes, the broker
// stops handing it entries once they cost that much (broker::delivery_cost;
// one entry may overshoot), and the connection gives the credit back as
// deliveries reach it, only while it is writable. What the node holds for a
// client that stopped reading is then its output's high watermark plus one
// window (and one entry) per consumer, however many permits it granted and
// whatever its messages' sizes.
//
// Counting: `outstanding` mirrors the broker's credit for the consumer:
// the window handed at attach, plus what take() handed since, less what
// the deliveries that reached the connection cost (the broker charges the
// same delivery_cost when it hands an entry out). Deliveries on their way
// from the broker are counted when they arrive, so outstanding is what the
// broker has left plus what is on its way: never above the window.
//
// Threads: the connection's; no locks, no allocation.
#pragma once

#include <cstdint>

namespace magnetar::protocol {

class DeliveryCredit {
 public:
  // REQUIRES: window >= 1; the consumer was attached with `window` as its
  // credit.
  explicit DeliveryCredit(int64_t window) : window_(window), outstanding_(window) {}

  // Deliveries that cost `cost` reached the connection.
  void delivered(int64_t cost) { outstanding_ -= cost; }

  // The credit to give the broker now, counted as outstanding from here
  // on: what brings it back to the window, once that is half the window or
  // more (one message to the broker per half window delivered, not one per
  // delivery); 0 otherwise.
  int64_t take() {
    const int64_t room = window_ - outstanding_;
    if (room * 2 < window_) return 0;
    outstanding_ = window_;
    return room;
  }

  int64_t window() const { return window_; }
  // Credit the broker holds or that is on its way back as deliveries;
  // below zero while an entry's overshoot is not made up for.
  int64_t outstanding() const { return outstanding_; }

 private:
  int64_t window_;
  int64_t outstanding_;
};

}  // namespace magnetar::protocol
