#include "certctl/loop/sidecar.h"

#include <chrono>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/certdir/cert_dir.h"
#include "certctl/leader/elector.h"

#include "fakes/fake_client.h"
#include "support/temp_dir.h"

namespace certctl::loop {
namespace {

using certctl::testing::FakeClient;
using certctl::testing::TempDir;
using certctl::testing::Verb;
using kube::Json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kNs[] = "infra";

Json Vwc() {
  const Json webhook = {{"name", "a.hook.io"},
                        {"clientConfig", {{"service", {{"name", "hook"}, {"namespace", kNs}}}}}};
  return {{"metadata", {{"name", "hook"}}}, {"webhooks", {webhook}}};
}

SidecarConfig Config(const TempDir& dir) {
  SidecarConfig config;
  config.pass.secret.ns = kNs;
  config.pass.secret.name = "webhook-server-cert";
  config.pass.secret.identity.service = "hook";
  config.pass.secret.identity.namespace_name = kNs;
  config.pass.secret.ca.common_name = "hook-ca";
  config.pass.targets.validating_webhooks = {"hook"};
  config.pass.cert_dir = dir / "tls";
  config.ready_file = dir / "ready";
  return config;
}

// Waits for `condition` for as long as a loaded machine might need; the test is about
// the outcome, not the speed.
template <typename Condition>
bool Eventually(Condition condition) {
  for (int attempt = 0; attempt < 300 && !condition(); ++attempt) {
    std::this_thread::sleep_for(50ms);
  }
  return condition();
}

// Runs the sidecar on a thread of its own for the test's lifetime.
class Running {
 public:
  Running(FakeClient& api, SidecarConfig config)
      : metrics_(registry_),
        sidecar_(api, clock_, std::move(config), metrics_, [](LogLevel, const std::string&) {}),
        thread_([this] { sidecar_.Run(); }) {}
  ~Running() { StopAndJoin(); }

  void StopAndJoin() {
    sidecar_.Stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  Sidecar& sidecar() { return sidecar_; }
  const metrics::Registry& registry() const { return registry_; }
  SidecarMetrics& metrics() { return metrics_; }

 private:
  SystemClock clock_;
  metrics::Registry registry_;
  SidecarMetrics metrics_;
  Sidecar sidecar_;
  std::thread thread_;
};

TEST(Sidecar, ColdStartEndsReadyWithFolderBundleAndMetrics) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  Running running(api, Config(dir));
  EXPECT_EQ(running.sidecar().NotReady(), "starting");
  ASSERT_TRUE(Eventually([&] { return !running.sidecar().NotReady(); }))
      << *running.sidecar().NotReady();
  EXPECT_TRUE(running.sidecar().Alive());
  EXPECT_TRUE(std::filesystem::exists(dir / "ready"));
  EXPECT_TRUE(certdir::ReadServingFiles(dir / "tls").value().has_value());
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kSecrets), 1);
  EXPECT_EQ(api.CountOf(Verb::kPatch, kube::kValidatingWebhookConfigurations), 1);
  // An Event for each write: the Secret created, the bundle injected.
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kEvents), 2);
  EXPECT_EQ(running.metrics().ready.Value({}), 1);
  EXPECT_EQ(running.metrics().leader.Value({}), 1);
  EXPECT_EQ(running.metrics().writes.Value({"secret"}), 1);
  EXPECT_GT(running.metrics().expiration.Value({"infra/webhook-server-cert", "leaf"}), 0);
  const std::string text = running.registry().Render();
  EXPECT_THAT(text, HasSubstr("certctl_reconcile_total{result=\"ready\"}"));

  running.StopAndJoin();
  EXPECT_FALSE(std::filesystem::exists(dir / "ready"));
}

TEST(Sidecar, AFollowerWritesNothingAndSaysWhoItWaitsFor) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  // Another replica holds the lease and keeps renewing it.
  SystemClock clock;
  leader::Elector other(api, clock, {kNs, "webhook-server-cert-certctl", "other"});
  ASSERT_TRUE(other.TryAcquireOrRenew().value());
  SidecarConfig config = Config(dir);
  config.election = leader::ElectionConfig{kNs, "webhook-server-cert-certctl", "me"};
  Running running(api, config);
  ASSERT_TRUE(Eventually([&] {
    auto why = running.sidecar().NotReady();
    return why && why->find("waiting for the leader") != std::string::npos;
  }));
  EXPECT_THAT(*running.sidecar().NotReady(), HasSubstr("secret/infra/webhook-server-cert"));
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kSecrets), 0);
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kEvents), 0);
  EXPECT_EQ(running.metrics().leader.Value({}), 0);
}

}  // namespace
}  // namespace certctl::loop
