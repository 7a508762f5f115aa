// NcclLibrary and PlanReform without a GPU: which libnccl is loaded and
// which fault-tolerance path a re-formation takes, decided by version and
// symbol availability. The libraries are real shared objects
// (nccl_fixture_library.cc built per NCCL version under test) opened with
// dlopen exactly as a real libnccl is.
#include "backend/nccl/nccl_library.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "backend/nccl/nccl_reform.h"
#include "khorovod/backend_info.h"

namespace khorovod {
namespace {

// KHOROVOD_TEST_NCCL_FIXTURES: where the fixtures are when the test was
// moved to another machine (scripts/gpu-check.sh packs them).
std::string Fixture(const char* name) {
  const char* moved = std::getenv("KHOROVOD_TEST_NCCL_FIXTURES");
  return std::string(moved && *moved ? moved : KH_FIXTURE_DIR) + "/lib" + name + ".so";
}

TEST(NcclVersion, BothFormulas) {
  EXPECT_EQ(NcclVersion::FromCode(2708).str(), "2.7.8");
  EXPECT_EQ(NcclVersion::FromCode(22809).str(), "2.28.9");
  EXPECT_EQ(NcclVersion::FromCode(23203).code(), 23203);
  EXPECT_EQ(NcclVersion::FromCode(2708).code(), 2708);
}

TEST(NcclFeatures, ByVersionAndSymbol) {
  NcclSymbols all{true, true, true, true};
  NcclFeatures f = NcclFeatures::Of(NcclVersion::FromCode(22809), all);
  EXPECT_TRUE(f.shrink);
  EXPECT_FALSE(f.grow) << "grow needs 2.29 even when the symbol is there";
  EXPECT_FALSE(f.multi_rank_gpu_env);
  f = NcclFeatures::Of(NcclVersion::FromCode(22902), all);
  EXPECT_TRUE(f.grow);
  EXPECT_FALSE(f.multi_rank_gpu_env);
  f = NcclFeatures::Of(NcclVersion::FromCode(23203), NcclSymbols{true, false, false, false});
  EXPECT_TRUE(f.shrink);
  EXPECT_FALSE(f.revoke);
  EXPECT_FALSE(f.grow) << "no ncclCommGrow symbol";
  EXPECT_TRUE(f.multi_rank_gpu_env);
  f = NcclFeatures::Of(NcclVersion::FromCode(22700), NcclSymbols{false, false, false, false});
  EXPECT_FALSE(f.shrink);
}

TEST(NcclLibrary, LoadsAndReportsTheFeaturesItHas) {
  auto lib = NcclLibrary::Open(Fixture("nccl_fixture_2_28"));
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_EQ((*lib)->version().str(), "2.28.9");
  EXPECT_TRUE((*lib)->features().shrink);
  EXPECT_FALSE((*lib)->features().grow);
  EXPECT_NE((*lib)->CommShrink, nullptr);
  EXPECT_EQ((*lib)->CommGrow, nullptr);
  EXPECT_EQ((*lib)->CommRevoke, nullptr);
  EXPECT_NE((*lib)->Describe().find("NCCL 2.28.9 from "), std::string::npos) << (*lib)->Describe();

  lib = NcclLibrary::Open(Fixture("nccl_fixture_2_32"));
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_TRUE((*lib)->features().shrink && (*lib)->features().grow && (*lib)->features().revoke);
  EXPECT_NE((*lib)->CommGrow, nullptr);
  EXPECT_NE((*lib)->CommGetUniqueId, nullptr);
}

TEST(NcclLibrary, GrowSymbolInAnOldVersionIsNotUsed) {
  // 2.28 with the grow symbols exported: the version decides.
  auto lib = NcclLibrary::Open(Fixture("nccl_fixture_2_28_growsym"));
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_FALSE((*lib)->features().grow);
  EXPECT_EQ((*lib)->CommGrow, nullptr);
}

TEST(NcclLibrary, RefusesOldOrIncompleteLibraries) {
  auto old = NcclLibrary::Open(Fixture("nccl_fixture_2_26"));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("2.26.5, older than 2.27"), std::string::npos)
      << old.status().message();
  auto broken = NcclLibrary::Open(Fixture("nccl_fixture_noallreduce"));
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("lacks ncclAllReduce"), std::string::npos)
      << broken.status().message();
  auto missing = NcclLibrary::Load("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("KHOROVOD_NCCL_LIBRARY=/nonexistent/libnccl.so.2"),
            std::string::npos)
      << missing.status().message();
}

TEST(NcclLibrary, SearchOrderOverrideThenLinkerThenWheels) {
  EXPECT_EQ(NcclSearchOrder("/x/libnccl.so.2", {{"PYTHONPATH", "/y"}}),
            std::vector<std::string>{"/x/libnccl.so.2"});
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "kh_nccl_search";
  std::filesystem::create_directories(dir / "nvidia/nccl/lib");
  const std::string wheel = (dir / "nvidia/nccl/lib/libnccl.so.2").string();
  std::filesystem::copy_file(Fixture("nccl_fixture_2_32"), wheel,
                             std::filesystem::copy_options::overwrite_existing);
  auto order = NcclSearchOrder("", {{"PYTHONPATH", "/nonexistent:" + dir.string()}});
  ASSERT_GE(order.size(), 2u);
  EXPECT_EQ(order[0], "libnccl.so.2");
  EXPECT_EQ(order[1], wheel);
}

TEST(DescribeBackend, ReportsTheLoadedNccl) {
  Config config;
  config.nccl_library = Fixture("nccl_fixture_2_32");
  auto info = DescribeBackend("nccl", config);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->at("version"), "2.32.3");
  EXPECT_EQ(info->at("version_code"), "23203");
  EXPECT_EQ(info->at("grow"), "1");
  config.nccl_library = Fixture("nccl_fixture_2_26");
  EXPECT_FALSE(DescribeBackend("nccl", config).ok());
  EXPECT_EQ(DescribeBackend("no-such-backend", config).status().code(),
            StatusCode::kInvalidArgument);
}

// --- PlanReform -------------------------------------------------------------

ReformMember Old(uint64_t id, int rank, int size, bool shrink = true, bool grow = true) {
  ReformMember m;
  m.comm_id = id;
  m.old_rank = rank;
  m.old_size = size;
  m.shrink = shrink;
  m.grow = grow;
  m.revoke = 1;
  return m;
}
ReformMember New(bool shrink = true, bool grow = true) {
  ReformMember m;
  m.shrink = shrink;
  m.grow = grow;
  return m;
}

TEST(PlanReform, FirstFormationAndReuse) {
  EXPECT_EQ(PlanReform({New(), New()}).path, ReformPath::kInit);
  EXPECT_EQ(PlanReform({Old(7, 0, 2), Old(7, 1, 2)}).path, ReformPath::kReuse);
}

TEST(PlanReform, LostPeerShrinksWhereTheLibraryCan) {
  ReformPlan p = PlanReform({Old(7, 0, 4), Old(7, 2, 4), Old(7, 3, 4)});
  EXPECT_EQ(p.path, ReformPath::kShrink);
  EXPECT_EQ(p.exclude, std::vector<int>{1});
  EXPECT_TRUE(p.abort_parent) << "not revoked: shrink with NCCL_SHRINK_ABORT";
  // Rank 0 lost: the survivors keep their order.
  p = PlanReform({Old(7, 1, 3), Old(7, 2, 3)});
  EXPECT_EQ(p.path, ReformPath::kShrink);
  EXPECT_EQ(p.exclude, std::vector<int>{0});
  // One survivor's NCCL cannot shrink: everyone inits.
  EXPECT_EQ(PlanReform({Old(7, 0, 3), Old(7, 1, 3, false)}).path, ReformPath::kInit);
  // A broken communicator that was revoked shrinks without the abort flag.
  ReformMember a = Old(7, 0, 3), b = Old(7, 2, 3);
  a.broken = b.broken = 1;
  p = PlanReform({a, b});
  EXPECT_EQ(p.path, ReformPath::kShrink);
  EXPECT_FALSE(p.abort_parent);
  b.revoke = 0;  // broken and not revoked (an NCCL without ncclCommRevoke aborts instead)
  EXPECT_EQ(PlanReform({a, b}).path, ReformPath::kInit);
}

TEST(PlanReform, JoinersGrowWhereTheLibraryCan) {
  ReformPlan p = PlanReform({Old(7, 0, 2), Old(7, 1, 2), New()});
  EXPECT_EQ(p.path, ReformPath::kGrow);
  EXPECT_EQ(p.survivors, 2);
  EXPECT_EQ(
      PlanReform({Old(7, 0, 2, true, false), Old(7, 1, 2, true, false), New(true, false)}).path,
      ReformPath::kInit);
  EXPECT_EQ(PlanReform({Old(7, 0, 3), Old(7, 2, 3), New()}).path, ReformPath::kShrinkGrow);
}

TEST(PlanReform, OrderOrHistoryMismatchInits) {
  EXPECT_EQ(PlanReform({Old(7, 1, 2), Old(7, 0, 2)}).path, ReformPath::kInit) << "reordered";
  EXPECT_EQ(PlanReform({Old(7, 0, 2), New(), Old(7, 1, 2)}).path, ReformPath::kInit)
      << "newcomer in the middle";
  EXPECT_EQ(PlanReform({New(), Old(7, 0, 2)}).path, ReformPath::kInit)
      << "new rank 0 is a newcomer";
  EXPECT_EQ(PlanReform({Old(7, 0, 2), Old(8, 1, 2)}).path, ReformPath::kInit) << "two histories";
  ReformMember a = Old(7, 0, 2), b = Old(7, 1, 2);
  a.broken = 1;
  EXPECT_EQ(PlanReform({a, b}).path, ReformPath::kInit) << "failed, nobody lost";
}

TEST(PlanReform, NextIdsDifferPerStep) {
  EXPECT_NE(NextCommId(7, ReformPath::kShrink, 3), NextCommId(7, ReformPath::kGrow, 3));
  EXPECT_NE(NextCommId(7, ReformPath::kShrink, 3), NextCommId(7, ReformPath::kShrink, 2));
  EXPECT_NE(NextCommId(7, ReformPath::kShrink, 3), 0u);
}

}  // namespace
}  // namespace khorovod
