// khorovodrun's metrics port layout from KHOROVOD_METRICS_PORT.
#include <gtest/gtest.h>

#include "metrics_ports.h"

namespace khorovod::launcher {
namespace {

TEST(MetricsPorts, UnsetOrZeroIsOff) {
  std::string error;
  auto off = metrics_ports_from_env({"PATH=/bin"}, 4, &error);
  ASSERT_TRUE(off.has_value());
  EXPECT_FALSE(off->enabled());
  auto zero = metrics_ports_from_env({"KHOROVOD_METRICS_PORT=0"}, 4, &error);
  ASSERT_TRUE(zero.has_value());
  EXPECT_FALSE(zero->enabled());
}

TEST(MetricsPorts, ServerOnTheBaseWorkersAfterIt) {
  std::string error;
  auto p = metrics_ports_from_env({"KHOROVOD_METRICS_PORT=9100"}, 4, &error);
  ASSERT_TRUE(p.has_value()) << error;
  EXPECT_EQ(p->server(), 9100);
  EXPECT_EQ(p->worker(0), 9101);
  EXPECT_EQ(p->worker(3), 9104);
}

TEST(MetricsPorts, BadValuesNameTheVariable) {
  for (const char* bad : {"KHOROVOD_METRICS_PORT=abc", "KHOROVOD_METRICS_PORT=-5", "KHOROVOD_METRICS_PORT=65533",
                          "KHOROVOD_METRICS_PORT=91x"}) {
    std::string error;
    EXPECT_FALSE(metrics_ports_from_env({bad}, 4, &error).has_value()) << bad;
    EXPECT_NE(error.find("KHOROVOD_METRICS_PORT"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace khorovod::launcher
