#include "common/metrics.h"

#include <gtest/gtest.h>

namespace magnetar::common {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndLabels) {
  MetricsRegistry r;
  r.counter("pulsar_in_messages_total", "Messages in", {{"topic", "persistent://a/b/c"}}).inc(3);
  r.gauge("pulsar_msg_backlog", "Backlog", {{"topic", "t\"x"}}).set(12.5);
  std::string text = r.render();
  EXPECT_NE(text.find("# HELP pulsar_in_messages_total Messages in\n# TYPE pulsar_in_messages_total counter\n"),
            std::string::npos);
  EXPECT_NE(text.find("pulsar_in_messages_total{topic=\"persistent://a/b/c\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("pulsar_msg_backlog{topic=\"t\\\"x\"} 12.5\n"), std::string::npos);
}

TEST(MetricsTest, SameNameAndLabelsIsTheSameSeries) {
  MetricsRegistry r;
  r.counter("c", "h", {{"k", "v"}}).inc();
  r.counter("c", "h", {{"k", "v"}}).inc();
  EXPECT_EQ(r.counter("c", "h", {{"k", "v"}}).value(), 2u);
  r.remove("c", {{"k", "v"}});
  EXPECT_EQ(r.render().find("c{"), std::string::npos);
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  MetricsRegistry r;
  auto& h = r.histogram("lat_seconds", "Latency", {0.001, 0.01, 0.1});
  h.observe(0.0005);
  h.observe(0.005);
  h.observe(0.005);
  h.observe(5);
  std::string text = r.render();
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.001\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.01\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.1\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_count 4\n"), std::string::npos) << text;
}

TEST(MetricsTest, CollectorsRunAtRenderAndCanBeRemoved) {
  MetricsRegistry r;
  int calls = 0;
  uint64_t id = r.add_collector("magnetar_things", "Things", MetricType::kGauge, [&calls](SampleWriter& w) {
    ++calls;
    w.sample("magnetar_things", {{"kind", "a"}}, 1);
  });
  std::string text = r.render();
  EXPECT_EQ(calls, 1);
  EXPECT_NE(text.find("# TYPE magnetar_things gauge\nmagnetar_things{kind=\"a\"} 1\n"), std::string::npos);
  r.remove_collector(id);
  EXPECT_EQ(r.render().find("magnetar_things"), std::string::npos);
}

}  // namespace
}  // namespace magnetar::common
