// kubeconfig and in-cluster loading.
#include "kube/cluster_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace khorovod::kube {
namespace {

class ClusterConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kcfg-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

TEST_F(ClusterConfigTest, CurrentContextWithInlineDataAndFiles) {
  Write("ca.crt", "CA-PEM");
  std::string path = Write("config", R"(
apiVersion: v1
kind: Config
current-context: b
clusters:
- name: c1
  cluster: {server: "https://10.1.2.3:6443", certificate-authority-data: "Q0EtREFUQQ=="}
- name: c2
  cluster: {server: "https://[::1]:8443", certificate-authority: ca.crt}
users:
- name: u1
  user: {token: tok-1}
- name: u2
  user: {client-certificate-data: "Q0VSVA==", client-key-data: "S0VZ"}
contexts:
- name: a
  context: {cluster: c1, user: u1, namespace: ns-a}
- name: b
  context: {cluster: c2, user: u2}
)");
  auto b = LoadKubeconfig(path);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 8443);
  EXPECT_EQ(b->ca_pem, "CA-PEM") << "relative files resolve against the kubeconfig's folder";
  EXPECT_EQ(b->client_cert_pem, "CERT");
  EXPECT_EQ(b->client_key_pem, "KEY");
  EXPECT_EQ(b->default_namespace, "default");
  EXPECT_FALSE(b->insecure_skip_tls_verify);

  auto a = LoadKubeconfig(path, "a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "10.1.2.3");
  EXPECT_EQ(a->port, 6443);
  EXPECT_EQ(a->ca_pem, "CA-DATA");
  EXPECT_EQ(a->bearer_token, "tok-1");
  EXPECT_EQ(a->default_namespace, "ns-a");
}

TEST_F(ClusterConfigTest, ErrorsAreClearNotCrashes) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"current-context: x\ncontexts: []\n", "context 'x' not found"},
      {"contexts: [{name: a, context: {cluster: c}}]\n", "no current-context"},
      {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: []\n",
       "has no server"},
      {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, "
       "cluster: {server: "
       "'ftp://x'}}]\n",
       "must be https"},
      {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, "
       "cluster: {server: "
       "'https://x:99999'}}]\n",
       "invalid port"},
      {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, "
       "cluster: {server: "
       "'https://x', certificate-authority-data: '!!!'}}]\n",
       "not valid base64"},
      {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, "
       "cluster: {server: "
       "'https://x', certificate-authority: /nonexistent/ca}}]\n",
       "cannot read"},
      {"{{{{ not yaml", "kubeconfig"},
  };
  for (const auto& c : cases) {
    auto r = LoadKubeconfig(Write("bad", c.text));
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
  }
  EXPECT_FALSE(LoadKubeconfig((dir_ / "missing").string()).ok());
}

TEST_F(ClusterConfigTest, InsecureOnlyWhenTheFileSaysSo) {
  auto r = LoadKubeconfig(Write("config", R"(
current-context: a
contexts: [{name: a, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {tokenFile: tok}}]
)"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->insecure_skip_tls_verify);
  EXPECT_EQ(r->port, 443);
  EXPECT_EQ(r->token_file, (dir_ / "tok").string());
}

TEST_F(ClusterConfigTest, InCluster) {
  Write("token", "sa-token\n");
  Write("ca.crt", "SA-CA");
  Write("namespace", "operators\n");
  auto r =
      LoadInCluster({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}},
                    dir_.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->host, "10.96.0.1");
  EXPECT_EQ(r->ca_pem, "SA-CA");
  EXPECT_EQ(r->token_file, (dir_ / "token").string());
  EXPECT_EQ(r->default_namespace, "operators");
  auto missing = LoadInCluster({}, dir_.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

}  // namespace
}  // namespace khorovod::kube
