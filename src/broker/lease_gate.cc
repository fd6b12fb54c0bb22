#include "broker/lease_gate.h"

#include <chrono>

#include "common/logging.h"

namespace magnetar::broker {

namespace {
constexpr std::chrono::milliseconds kLeaseCheck{20};
}  // namespace

LeaseGate::LeaseGate(runtime::Runtime& runtime, std::function<bool()> valid)
    : runtime_(runtime),
      valid_(std::move(valid)),
      reactors_(runtime.size()),
      held_(common::MetricsRegistry::global().counter(
          "magnetar_cluster_acks_held_total",
          "Publish acknowledgements that waited because this member's lease had lapsed (it was paused or cut off)")) {}

LeaseGate::~LeaseGate() = default;

void LeaseGate::pass(std::function<void(bool)> ack) {
  runtime::Reactor* reactor = runtime::Reactor::current();
  if (stopped_.load(std::memory_order_acquire) || reactor == nullptr) return ack(!stopped_.load());
  PerReactor& here = reactors_[reactor->index()];
  if (here.waiting.empty() && valid_()) return ack(true);
  if (here.waiting.empty()) {
    MLOG_WARN("cluster: this member's lease has lapsed: publish acknowledgements wait until it is renewed");
  }
  held_.inc();
  here.waiting.push_back(std::move(ack));
  if (!here.timer) here.timer = std::make_unique<runtime::Timer>(*reactor);
  if (!here.timer->active()) here.timer->every(kLeaseCheck, [this, &here]() { drain(here); });
}

void LeaseGate::drain(PerReactor& here) {
  while (!here.waiting.empty() && valid_()) {
    auto ack = std::move(here.waiting.front());
    here.waiting.pop_front();
    ack(true);
  }
  if (here.waiting.empty() && here.timer) here.timer->cancel();
}

void LeaseGate::stop() {
  stopped_.store(true, std::memory_order_release);
  for (size_t i = 0; i < reactors_.size(); ++i) {
    runtime_.reactor(i).run_sync([this, i]() {
      PerReactor& here = reactors_[i];
      auto waiting = std::move(here.waiting);
      here.waiting.clear();
      here.timer.reset();
      for (auto& ack : waiting) ack(false);
    });
  }
}

}  // namespace magnetar::broker
