// khorovodrun's metrics port layout from KHOROVOD_METRICS_PORT.
#include "launcher/metrics_ports.h"

#include <gtest/gtest.h>

namespace khorovod::launcher {
namespace {

TEST(MetricsPorts, UnsetOrZeroIsOff) {
  auto off = MetricsPortsFromEnv({"PATH=/bin"}, 4);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled());
  auto zero = MetricsPortsFromEnv({"KHOROVOD_METRICS_PORT=0"}, 4);
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->enabled());
}

TEST(MetricsPorts, ServerOnTheBaseWorkersAfterIt) {
  auto p = MetricsPortsFromEnv({"KHOROVOD_METRICS_PORT=9100"}, 4);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->server(), 9100);
  EXPECT_EQ(p->worker(0), 9101);
  EXPECT_EQ(p->worker(3), 9104);
}

TEST(MetricsPorts, BadValuesNameTheVariable) {
  for (const char* bad : {"KHOROVOD_METRICS_PORT=abc", "KHOROVOD_METRICS_PORT=-5",
                          "KHOROVOD_METRICS_PORT=65533", "KHOROVOD_METRICS_PORT=91x"}) {
    const auto ports = MetricsPortsFromEnv({bad}, 4);
    ASSERT_FALSE(ports.ok()) << bad;
    EXPECT_EQ(ports.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(ports.status().message().find("KHOROVOD_METRICS_PORT"), std::string::npos)
        << ports.status().message();
  }
}

}  // namespace
}  // namespace khorovod::launcher
