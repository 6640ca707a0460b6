#include "certctl/metrics/registry.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::metrics {
namespace registry_test {
namespace {

using ::testing::HasSubstr;

TEST(Registry, RendersCountersAndGaugesInTheTextFormat) {
  Registry registry;
  Family& writes = registry.Counter("certctl_writes_total", "Writes made, by kind.", {"kind"});
  Family& ready = registry.Gauge("certctl_ready", "1 when ready.");
  writes.Add({"Secret"});
  writes.Add({"Secret"}, 2);
  writes.Add({"ValidatingWebhookConfiguration"});
  writes.Add({"Secret"}, -5);  // counters never go down
  ready.Set({}, 1);
  EXPECT_EQ(registry.Render(),
            "# HELP certctl_writes_total Writes made, by kind.\n"
            "# TYPE certctl_writes_total counter\n"
            "certctl_writes_total{kind=\"Secret\"} 3\n"
            "certctl_writes_total{kind=\"ValidatingWebhookConfiguration\"} 1\n"
            "# HELP certctl_ready 1 when ready.\n"
            "# TYPE certctl_ready gauge\n"
            "certctl_ready 1\n");
  EXPECT_EQ(writes.Value({"Secret"}), 3);
  EXPECT_EQ(writes.Value({"Lease"}), 0);
}

TEST(Registry, HistogramsHaveCumulativeBucketsSumAndCount) {
  Registry registry;
  Family& duration = registry.Histogram("certctl_reconcile_duration_seconds", "Reconcile time.",
                                        {"result"}, {0.01, 0.1, 1});
  duration.Observe({"success"}, 0.005);
  duration.Observe({"success"}, 0.05);
  duration.Observe({"success"}, 5);
  EXPECT_EQ(registry.Render(),
            "# HELP certctl_reconcile_duration_seconds Reconcile time.\n"
            "# TYPE certctl_reconcile_duration_seconds histogram\n"
            "certctl_reconcile_duration_seconds_bucket{result=\"success\",le=\"0.01\"} 1\n"
            "certctl_reconcile_duration_seconds_bucket{result=\"success\",le=\"0.1\"} 2\n"
            "certctl_reconcile_duration_seconds_bucket{result=\"success\",le=\"1\"} 2\n"
            "certctl_reconcile_duration_seconds_bucket{result=\"success\",le=\"+Inf\"} 3\n"
            "certctl_reconcile_duration_seconds_sum{result=\"success\"} 5.055\n"
            "certctl_reconcile_duration_seconds_count{result=\"success\"} 3\n");
  EXPECT_EQ(duration.Value({"success"}), 3);
}

TEST(Registry, LabelValuesAndHelpAreEscaped) {
  Registry registry;
  Family& family = registry.Gauge("g", "line one\nline \\two", {"secret"});
  family.Set({"a\"b\\c\nd"}, 1);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# HELP g line one\\nline \\\\two\n"));
  EXPECT_THAT(text, HasSubstr("g{secret=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

TEST(Registry, ValuesUseTheShortestExactForm) {
  EXPECT_EQ(FormatValue(1700000000), "1700000000");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(-2.5), "-2.5");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(Registry, AWrongNumberOfLabelValuesIsAProgrammingError) {
  Registry registry;
  Family& family = registry.Counter("c", "help", {"kind"});
  EXPECT_THROW(family.Add({}), std::logic_error);
  EXPECT_THROW(family.Add({"a", "b"}), std::logic_error);
}

TEST(Registry, ConcurrentUpdatesAreAllCounted) {
  Registry registry;
  Family& family = registry.Counter("c", "help", {"verb"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        family.Add({"get"});
        if (i % 1000 == 0) {
          (void)registry.Render();
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(family.Value({"get"}), 40000);
}

}  // namespace
}  // namespace registry_test
}  // namespace certctl::metrics
