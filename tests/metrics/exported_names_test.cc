// Every metric name the Grafana dashboard and the Prometheus rules reference
// is one the code exports, and docs/observability.md lists exactly what the
// code exports. Exported names come from rendering the real registries: the
// worker's WorkerMetrics, the rendezvous server's service and the operator's
// OperatorMetrics. Also runs promtool on the worker's and operator's output.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "controller/operator_metrics.h"
#include "observability/worker_metrics.h"
#include "promtool.h"
#include "service.h"

namespace khorovod {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Family names announced by "# TYPE name type" lines.
std::set<std::string> Families(const std::string& exposition) {
  std::set<std::string> out;
  static const std::regex type_line(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+))");
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, type_line)) out.insert(m[1]);
  }
  return out;
}

// The job label every series carries (docs/observability.md), not a metric.
constexpr const char* kJobLabel = "khorovod_job";

// khorovod_* metric names in PromQL text. Names with ':' are recording rules.
std::set<std::string> NamesIn(const std::string& text) {
  std::set<std::string> out;
  static const std::regex name(R"(\bkhorovod_[a-zA-Z0-9_:]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator();
       ++it) {
    if (it->str() != kJobLabel) out.insert(it->str());
  }
  return out;
}

// The family a referenced series belongs to (histogram series carry suffixes).
std::string FamilyOf(const std::string& series, const std::set<std::string>& families) {
  if (families.count(series)) return series;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (series.size() > s.size() && series.compare(series.size() - s.size(), s.size(), s) == 0) {
      std::string base = series.substr(0, series.size() - s.size());
      if (families.count(base)) return base;
    }
  }
  return "";
}

// The names listed in one "## ..." section of docs/observability.md, as
// `name` in the first column of its tables.
std::set<std::string> DocumentedNames(const std::string& docs, const std::string& heading) {
  const size_t start = docs.find("\n## " + heading);
  EXPECT_NE(start, std::string::npos)
      << "docs/observability.md lacks the section '" << heading << "'";
  if (start == std::string::npos) return {};
  size_t end = docs.find("\n## ", start + 4);
  if (end == std::string::npos) end = docs.size();
  std::set<std::string> out;
  static const std::regex row(R"(\n\| `(khorovod_[a-z0-9_]+)`)");
  const std::string section = docs.substr(start, end - start);
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row);
       it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

std::string WorkerExposition() {
  WorkerMetrics m;
  m.Configure(/*baseline=*/1000, /*fusion_threshold=*/1 << 20);
  m.SetTopology(1, 2, 3);
  m.StepBegin();
  m.StepEnd(32);
  m.Collective(OpType::kAllreduce, 3, 4096, std::chrono::microseconds(250));
  m.FusedAllreduce(4096);
  m.NegotiationRound(std::chrono::microseconds(40));
  m.Reset(ResetCause::kPeerFailure);
  m.Recovered(std::chrono::milliseconds(700));
  m.StateSync(1 << 16, std::chrono::milliseconds(3));
  return m.Render();
}

// The operator's exposition, after one reconcile and one API request, so
// every family has samples.
std::string OperatorExposition() {
  op::OperatorMetrics m(
      op::OperatorState{[] {
                          return std::map<op::JobPhase, int>{{op::JobPhase::kRunning, 1}};
                        },
                        [] { return size_t{0}; }, [] { return true; }, [] { return uint64_t{1}; },
                        [] { return 0.25; },
                        [] {
                          return op::GpuTotals{2, 4};
                        }});
  m.ObserveReconcile(op::ReconcileOutcome{}, 0.01);
  m.ObserveRequest("GET", "pods", 200, 0.002);
  return m.Render();
}

std::string RendezvousExposition() {
  rendezvous::ServiceOptions options;
  options.log = false;
  rendezvous::RendezvousService service(options);
  service.CountResponse(200);
  return service.Metrics();
}

class ExportedNames : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string& text : {WorkerExposition(), RendezvousExposition()}) {
      auto f = Families(text);
      exported_.insert(f.begin(), f.end());
    }
    docs_ = ReadFile(std::string(KHOROVOD_SOURCE_DIR) + "/docs/observability.md");
    operator_names_ = Families(OperatorExposition());
    const std::string rules =
        ReadFile(std::string(KHOROVOD_SOURCE_DIR) + "/deploy/monitoring/khorovod-rules.yaml");
    static const std::regex record(R"(- record: (\S+))");
    for (auto it = std::sregex_iterator(rules.begin(), rules.end(), record);
         it != std::sregex_iterator(); ++it) {
      recorded_.insert((*it)[1]);
    }
  }

  // Checks one referenced name; returns a complaint or "".
  std::string Check(const std::string& name) const {
    if (name.find(':') != std::string::npos) {
      return recorded_.count(name) ? "" : name + " is no recording rule in khorovod-rules.yaml";
    }
    if (name.rfind("khorovod_operator_", 0) == 0) {
      return FamilyOf(name, operator_names_).empty() ? name + " is not exported by the operator"
                                                     : "";
    }
    return FamilyOf(name, exported_).empty()
               ? name + " is not exported by the worker or the rendezvous server"
               : "";
  }

  std::set<std::string> exported_, operator_names_, recorded_;
  std::string docs_;
};

TEST_F(ExportedNames, DashboardReferencesOnlyExportedNames) {
  auto dashboard = nlohmann::json::parse(
      ReadFile(std::string(KHOROVOD_SOURCE_DIR) + "/deploy/monitoring/khorovod-dashboard.json"));
  size_t checked = 0;
  for (const auto& panel : dashboard["panels"]) {
    if (!panel.contains("targets")) continue;
    for (const auto& target : panel["targets"]) {
      for (const std::string& name : NamesIn(target["expr"].get<std::string>())) {
        ++checked;
        EXPECT_EQ(Check(name), "") << "panel '" << panel["title"].get<std::string>() << "'";
      }
    }
  }
  for (const std::string& name : NamesIn(dashboard["templating"].dump()))
    EXPECT_EQ(Check(name), "");
  EXPECT_GT(checked, 30u);
}

TEST_F(ExportedNames, RulesReferenceOnlyExportedNames) {
  const std::string rules =
      ReadFile(std::string(KHOROVOD_SOURCE_DIR) + "/deploy/monitoring/khorovod-rules.yaml");
  size_t checked = 0;
  for (const std::string& name : NamesIn(rules)) {
    ++checked;
    EXPECT_EQ(Check(name), "");
  }
  EXPECT_GT(checked, 10u);
}

TEST_F(ExportedNames, DocsListExactlyWhatTheCodeExports) {
  std::set<std::string> documented = DocumentedNames(docs_, "Worker metrics");
  for (const auto& n : DocumentedNames(docs_, "Rendezvous metrics")) documented.insert(n);
  for (const auto& name : exported_)
    EXPECT_TRUE(documented.count(name)) << name << " is exported but not documented";
  for (const auto& name : documented)
    EXPECT_TRUE(exported_.count(name)) << name << " is documented but not exported";
  EXPECT_EQ(DocumentedNames(docs_, "Operator metrics"), operator_names_)
      << "docs/observability.md lists exactly what the operator exports";
}

TEST_F(ExportedNames, CheckerRejectsUnknownNames) {
  EXPECT_NE(Check("khorovod_worker_no_such_metric"), "");
  EXPECT_NE(Check("khorovod_operator_no_such_metric"), "");
  EXPECT_NE(Check("khorovod_job:no_such_rule:ratio"), "");
  EXPECT_EQ(Check("khorovod_worker_step_duration_seconds_bucket"), "");
}

TEST(OperatorExposition, PromtoolAcceptsIt) {
  const std::string text = OperatorExposition();
  const auto r = metrics::testing::PromtoolCheckMetrics(text);
  EXPECT_TRUE(r.ok()) << "exit " << r.exit_code << ": " << r.output << "\n" << text;
}

TEST(WorkerExposition, PromtoolAcceptsIt) {
  const std::string text = WorkerExposition();
  const auto r = metrics::testing::PromtoolCheckMetrics(text);
  EXPECT_TRUE(r.ok()) << "exit " << r.exit_code << ": " << r.output << "\n" << text;
}

}  // namespace
}  // namespace khorovod
