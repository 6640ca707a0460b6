#include "certctl/loop/sidecar.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/certdir/cert_dir.h"
#include "certctl/leader/elector.h"

#include "fakes/fake_client.h"
#include "loop/sidecar_internal.h"
#include "support/temp_dir.h"
#include "support/tls_server.h"
#include "unit/loop/fixtures.h"

namespace certctl::loop {
namespace sidecar_test {
namespace {

using certctl::testing::FakeClient;
using certctl::testing::TempDir;
using certctl::testing::Verb;
using kube::Json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

using fixtures::kNs;
using fixtures::Vwc;

SidecarConfig Config(const TempDir& dir) {
  SidecarConfig config;
  config.pass = fixtures::HookPass(dir / "tls");
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
  Running(
      FakeClient& api, SidecarConfig config, LogSink log = [](LogLevel, const std::string&) {})
      : metrics_(registry_),
        sidecar_(api, clock_, std::move(config), metrics_, std::move(log)),
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
  // With notBefore, each certificate's lifetime: what the expiry alert measures by.
  for (const std::string role : {"ca", "leaf"}) {
    const double not_before =
        running.metrics().not_before.Value({"infra/webhook-server-cert", role});
    EXPECT_GT(not_before, 0) << role;
    EXPECT_LT(not_before, running.metrics().expiration.Value({"infra/webhook-server-cert", role}))
        << role;
  }
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

// A target without the bundle is the same for every replica: `injected` says so (and the
// ready file waits), while the readiness probe's view, which leaves it out, holds.
TEST(Sidecar, AFollowerWaitingForInjectionFailsOnlyTheInjectedCheck) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  {
    Running leader(api, Config(dir));
    ASSERT_TRUE(Eventually([&] { return !leader.sidecar().NotReady(); }));
  }
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());  // re-applied without caBundle
  SystemClock clock;
  leader::Elector other(api, clock, {kNs, "webhook-server-cert-certctl", "other"});
  ASSERT_TRUE(other.TryAcquireOrRenew().value());
  TempDir follower_dir;
  SidecarConfig config = Config(follower_dir);
  config.election = leader::ElectionConfig{kNs, "webhook-server-cert-certctl", "me"};
  Running running(api, config);
  ASSERT_TRUE(Eventually([&] {
    auto why = running.sidecar().NotReady();
    return why && why->starts_with("injected: waiting for the leader to inject the bundle");
  })) << running.sidecar().NotReady().value_or("ready");
  EXPECT_EQ(running.sidecar().NotReady({"injected"}), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(follower_dir / "ready"));
  EXPECT_TRUE(certdir::ReadServingFiles(follower_dir / "tls").value().has_value());
  EXPECT_EQ(running.metrics().ready.Value({}), 0);
}

TEST(Sidecar, AFollowerWarnsOfABadRotationAnnotationOnceNotEveryPass) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  SystemClock clock;
  ASSERT_TRUE(loop::Reconcile(api, Config(dir).pass, Role::kLeader, clock));
  Json secret = api.Object(kube::kSecrets, kNs, fixtures::kSecret).value();
  secret["metadata"]["annotations"][controller::kRotationPhaseAnnotation] = "stage-7";
  api.Put(kube::kSecrets, secret);
  // Another replica holds the lease: this one only reads, so the value stays.
  leader::Elector other(api, clock, {kNs, "webhook-server-cert-certctl", "other"});
  ASSERT_TRUE(other.TryAcquireOrRenew().value());
  SidecarConfig config = Config(dir);
  config.election = leader::ElectionConfig{kNs, "webhook-server-cert-certctl", "me"};
  std::mutex mutex;
  int warnings = 0;
  Running running(api, config, [&](LogLevel level, const std::string& message) {
    if (level == LogLevel::kWarning &&
        message.find(controller::kRotationPhaseAnnotation) != std::string::npos) {
      const std::lock_guard lock(mutex);
      ++warnings;
    }
  });
  ASSERT_TRUE(Eventually([&] { return !running.sidecar().NotReady(); }))
      << *running.sidecar().NotReady();
  for (int pass = 0; pass < 3; ++pass) {
    running.sidecar().Reconcile("test");
  }
  ASSERT_TRUE(Eventually([&] { return running.metrics().reconciles.Value({"ready"}) >= 3; }));
  running.StopAndJoin();
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(api.CountOf(Verb::kUpdate, kube::kSecrets), 0);
}

// A new set replaces the folder's old one at once; the old set's files stay a moment for
// readers that were opening them, then go.
TEST(Sidecar, TheReplacedSetOfTheFolderIsRemovedShortlyAfterTheSwap) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  Running running(api, Config(dir));
  ASSERT_TRUE(Eventually([&] { return !running.sidecar().NotReady(); }));
  const auto sets = [&] {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "tls")) {
      const std::string name = entry.path().filename().string();
      count += name.starts_with("..") && name != "..data" && !entry.is_symlink() ? 1 : 0;
    }
    return count;
  };
  const auto first = std::filesystem::read_symlink(dir / "tls" / "..data");
  ASSERT_TRUE(api.Remove(kube::kSecrets, kNs, "webhook-server-cert"));
  running.sidecar().Reconcile("test");
  ASSERT_TRUE(
      Eventually([&] { return std::filesystem::read_symlink(dir / "tls" / "..data") != first; }));
  EXPECT_TRUE(Eventually([&] { return sets() == 1; })) << sets();
  EXPECT_FALSE(std::filesystem::exists(dir / "tls" / first));
}

// A folder of the user's named like a set is no set of certctl's: it stays, told once.
TEST(Sidecar, AFolderThatOnlyLooksLikeASetIsLeftAndToldOnce) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  dir.Write("tls/..2025_01_01_00_00_00.abcdef/notes", "mine");
  std::mutex mutex;
  std::vector<std::string> warnings;
  Running running(api, Config(dir), [&](LogLevel level, const std::string& message) {
    const std::lock_guard lock(mutex);
    if (level == LogLevel::kWarning) {
      warnings.push_back(message);
    }
  });
  const auto told = [&] {
    const std::lock_guard lock(mutex);
    return std::count_if(warnings.begin(), warnings.end(), [](const std::string& warning) {
      return warning.find("..2025_01_01_00_00_00.abcdef") != std::string::npos;
    });
  };
  ASSERT_TRUE(Eventually([&] { return !running.sidecar().NotReady(); }));
  for (int swap = 0; swap < 2; ++swap) {
    const auto served = std::filesystem::read_symlink(dir / "tls" / "..data");
    ASSERT_TRUE(api.Remove(kube::kSecrets, kNs, "webhook-server-cert"));
    running.sidecar().Reconcile("test");
    ASSERT_TRUE(Eventually(
        [&] { return std::filesystem::read_symlink(dir / "tls" / "..data") != served; }));
    // The replaced set is gone: the clean-up that judged the lookalike has run.
    ASSERT_TRUE(Eventually([&] { return !std::filesystem::exists(dir / "tls" / served); }));
  }
  EXPECT_EQ(told(), 1);
  EXPECT_EQ(dir.Read("tls/..2025_01_01_00_00_00.abcdef/notes"), "mine");
}

// The fake API has no watch: every watch keeps failing, as when the API server drops them.
// A caBundle wiped meanwhile must still be repaired (and readiness re-judged) by polling.
TEST(Sidecar, WhileWatchesFailAWipedBundleIsRepairedByPolling) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  Running running(api, Config(dir));
  ASSERT_TRUE(Eventually([&] { return !running.sidecar().NotReady(); }));
  Json wiped = *api.Object(kube::kValidatingWebhookConfigurations, "", "hook");
  wiped["webhooks"][0]["clientConfig"].erase("caBundle");
  api.Put(kube::kValidatingWebhookConfigurations, wiped);
  EXPECT_TRUE(Eventually([&] {
    const auto stored = api.Object(kube::kValidatingWebhookConfigurations, "", "hook");
    return stored && stored->at("webhooks")[0]["clientConfig"].contains("caBundle");
  }));
  EXPECT_EQ(api.CountOf(Verb::kPatch, kube::kValidatingWebhookConfigurations), 2);
}

TEST(Sidecar, AnUnreachableApiKeepsReadinessButARefusalEndsIt) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  Running running(api, Config(dir));
  ASSERT_TRUE(Eventually([&] { return !running.sidecar().NotReady(); }));
  const auto failed_passes = [&] { return running.metrics().reconciles.Value({"error"}); };

  api.InjectFailure(Verb::kGet, kube::kSecrets,
                    Error(ErrorCode::kUnavailable, "get secret/infra/webhook-server-cert: 503"), 2);
  running.sidecar().Reconcile("test");
  ASSERT_TRUE(Eventually([&] { return failed_passes() >= 2; }));
  EXPECT_FALSE(running.sidecar().NotReady());
  EXPECT_TRUE(std::filesystem::exists(dir / "ready"));

  api.InjectFailure(Verb::kGet, kube::kSecrets,
                    Error(ErrorCode::kPermissionDenied, "secrets is forbidden"), 1000);
  running.sidecar().Reconcile("test");
  ASSERT_TRUE(Eventually([&] {
    const auto why = running.sidecar().NotReady();
    return why && why->find("forbidden") != std::string::npos;
  }));
  EXPECT_FALSE(std::filesystem::exists(dir / "ready"));
  // What the targets hold was not read: not ok, and said to be unknown rather than failed.
  for (const ReadinessCheck& check : running.sidecar().Readiness()) {
    if (check.name == "injected" || check.name == "callable") {
      EXPECT_FALSE(check.ok) << check.name;
      EXPECT_TRUE(check.unknown) << check.name;
    }
  }
}

TEST(SidecarBackoff, ARefusalIsRetriedWithinTenSecondsAnythingElseWithinAMinute) {
  EXPECT_EQ(internal::MaxBackoffAfter(Error(ErrorCode::kPermissionDenied, "forbidden")), 10s);
  EXPECT_EQ(internal::MaxBackoffAfter(Error(ErrorCode::kUnauthenticated, "Unauthorized")), 10s);
  EXPECT_EQ(internal::MaxBackoffAfter(Error(ErrorCode::kUnavailable, "503")), 60s);
}

// --serving-addr: ready only once the webhook's listener verifies against the bundle the
// target holds; the ready file and /readyz?exclude=serving need the certificate alone.
TEST(Sidecar, TheServingCheckWaitsForTheWebhookToServeATrustedCertificate) {
  FakeClient api;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  testing::TlsServer webhook(testing::TlsServer::Mode::kTls);  // no certificate yet
  SidecarConfig config = Config(dir);
  config.serving = ServingCheck{{"127.0.0.1", webhook.port()}, "hook.infra.svc"};
  Running running(api, config);
  ASSERT_TRUE(Eventually([&] { return !running.sidecar().NotReady({"serving"}); }));
  EXPECT_TRUE(std::filesystem::exists(dir / "ready"));
  ASSERT_TRUE(Eventually([&] {
    const auto why = running.sidecar().NotReady();
    return why && why->starts_with("serving: TLS handshake with 127.0.0.1:");
  })) << running.sidecar().NotReady().value_or("ready");
  EXPECT_EQ(running.metrics().ready.Value({}), 0);
  const auto checks = running.sidecar().Readiness();
  ASSERT_EQ(checks.size(), 4U);
  EXPECT_EQ(checks[0].name, "certificate");
  EXPECT_TRUE(checks[0].ok);
  EXPECT_EQ(checks[1].name, "injected");
  EXPECT_TRUE(checks[1].ok);
  EXPECT_EQ(checks[2].name, "callable");
  EXPECT_TRUE(checks[2].ok);
  EXPECT_EQ(checks[3].name, "serving");
  EXPECT_FALSE(checks[3].ok);

  // The webhook loads what certctl wrote to the folder.
  const auto files = certdir::ReadServingFiles(dir / "tls").value().value();
  webhook.SetPair(files.tls_crt, files.tls_key);
  ASSERT_TRUE(Eventually([&] { return !running.sidecar().NotReady(); }))
      << *running.sidecar().NotReady();
  EXPECT_EQ(running.metrics().ready.Value({}), 1);
  EXPECT_GT(webhook.handshakes(), 0);

  // A webhook serving a certificate the target does not trust is not ready.
  TempDir elsewhere;
  SidecarConfig other = Config(elsewhere);
  FakeClient other_api;
  other_api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  {
    Running stranger(other_api, other);
    ASSERT_TRUE(Eventually([&] { return !stranger.sidecar().NotReady(); }));
  }
  const auto foreign = certdir::ReadServingFiles(elsewhere / "tls").value().value();
  webhook.SetPair(foreign.tls_crt, foreign.tls_key);
  ASSERT_TRUE(Eventually([&] {
    const auto why = running.sidecar().NotReady();
    return why && why->find("does not verify against the caBundle") != std::string::npos;
  })) << running.sidecar().NotReady().value_or("ready");
  EXPECT_TRUE(std::filesystem::exists(dir / "ready"));
}

}  // namespace
}  // namespace sidecar_test
}  // namespace certctl::loop
