#include "broker/publish_stages.h"

#include "common/stage_timing.h"

namespace magnetar::broker {
namespace {

common::Histogram& stage(const char* protocol, const char* name) {
  return common::MetricsRegistry::global().histogram(
      "magnetar_publish_stage_seconds",
      "Where publish time goes, per protocol and stage (to_topic, ledger, storage, answer; broker is all but "
      "storage; total from read to answer)",
      common::stage_latency_bounds(), {{"protocol", protocol}, {"stage", name}});
}

}  // namespace

PublishStages::PublishStages(const char* protocol)
    : to_topic_(stage(protocol, "to_topic")),
      ledger_(stage(protocol, "ledger")),
      storage_(stage(protocol, "storage")),
      answer_(stage(protocol, "answer")),
      broker_(stage(protocol, "broker")),
      total_(stage(protocol, "total")) {}

PublishStages& PublishStages::of(PublishProtocol protocol) {
  // Never destroyed: reactors may record while the process exits.
  static PublishStages* pulsar = new PublishStages("pulsar");
  static PublishStages* kafka = new PublishStages("kafka");
  static PublishStages* amqp = new PublishStages("amqp");
  switch (protocol) {
    case PublishProtocol::kPulsar: return *pulsar;
    case PublishProtocol::kKafka: return *kafka;
    case PublishProtocol::kAmqp: return *amqp;
  }
  return *pulsar;
}

void PublishStages::Marks::take_add_timing() {
  const ledger::AddTiming* t = ledger::current_add_timing();
  if (t == nullptr) return;
  stored = *t;
  has_stored = true;
}

void PublishStages::record(const Marks& m) {
  if (!m.has_stored || m.received_ns == 0) return;
  const int64_t now = common::monotonic_ns();
  const int64_t at_topic = m.at_topic_ns != 0 ? m.at_topic_ns : m.stored.accepted_ns;
  to_topic_.observe(common::seconds_between(m.received_ns, at_topic));
  ledger_.observe(common::seconds_between(at_topic, m.stored.sent_ns));
  const double storage = common::seconds_between(m.stored.sent_ns, m.stored.stored_ns);
  storage_.observe(storage);
  answer_.observe(common::seconds_between(m.stored.stored_ns, now));
  const double total = common::seconds_between(m.received_ns, now);
  total_.observe(total);
  broker_.observe(total > storage ? total - storage : 0);
}

}  // namespace magnetar::broker
