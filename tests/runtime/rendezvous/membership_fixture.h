// Shared fixture of the membership policy tests: a Membership driven by a
// fake clock (no threads, no sleeps, every time step explicit).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "membership.h"

namespace khorovod::rendezvous {

using std::chrono::hours;

class MembershipTest : public ::testing::Test {
 protected:
  MembershipPolicy Policy() {
    MembershipPolicy p;
    p.min_workers = 1;
    p.max_workers = 16;
    p.settle = Millis(100);
    p.heartbeat_timeout = hours(10);  // tests of heartbeats lower it
    p.elastic_timeout = hours(20);
    p.reform_timeout = hours(30);
    return p;
  }
  void Start(MembershipPolicy p) { m_ = std::make_unique<Membership>(p, now_); }
  void Advance(int64_t ms) { now_ += Millis(ms); }

  void Register(const std::string& name, const std::string& address = "10.0.0.1", int slots = 8) {
    MembershipResult r = m_->Register({name, address, slots}, now_);
    ASSERT_TRUE(r.ok()) << name << ": " << r.message;
  }
  // AwaitNext, expecting success; returns the rank (-1: not ready).
  int Await(const std::string& name, int64_t after) {
    NextView v;
    MembershipResult r = m_->AwaitNext(name, after, now_, &v);
    EXPECT_TRUE(r.ok()) << name << ": " << r.message;
    return v.ready ? v.rank : -1;
  }
  HeartbeatView Beat(const std::string& name) {
    HeartbeatView v;
    MembershipResult r = m_->Heartbeat(name, now_, &v);
    EXPECT_TRUE(r.ok()) << name << ": " << r.message;
    return v;
  }
  std::vector<std::string> WorldNames() {
    std::vector<std::string> names;
    if (auto w = m_->world()) {
      for (const auto& a : w->members) names.push_back(a.name);
    }
    return names;
  }
  // Forms generation 1 from `names` (all ready at once, then the settle window).
  void FormFirst(const std::vector<std::string>& names) {
    for (const auto& n : names) Register(n);
    for (const auto& n : names) Await(n, 0);
    Advance(100);
    m_->Tick(now_);
    ASSERT_EQ(m_->generation(), 1);
    ASSERT_EQ(WorldNames(), names);
  }

  TimePoint now_ = TimePoint{} + hours(1000);
  std::unique_ptr<Membership> m_;
};

}  // namespace khorovod::rendezvous
