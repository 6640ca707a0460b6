#include "certctl/loop/pass.h"

#include <chrono>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/certdir/cert_dir.h"
#include "certctl/controller/name_request.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"
#include "certctl/util/duration.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"
#include "support/temp_dir.h"
#include "unit/loop/fixtures.h"

namespace certctl::loop {
namespace pass_test {
namespace {

using StringMap = std::map<std::string, std::string>;
using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::TempDir;
using kube::Json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

using fixtures::kNs;
using fixtures::kSecret;
using fixtures::Vwc;
constexpr auto kDay = std::chrono::hours(24);

PassConfig Config(const std::filesystem::path& dir) { return fixtures::HookPass(dir); }

std::string Data(const FakeClient& api, const std::string& key) {
  const Json secret = api.Object(kube::kSecrets, kNs, kSecret).value();
  return Base64Decode(secret["data"][key].get<std::string>()).value();
}

std::string Bundle(const FakeClient& api) {
  const Json vwc = api.Object(kube::kValidatingWebhookConfigurations, "", "hook").value();
  return Base64Decode(vwc["webhooks"][0]["clientConfig"]["caBundle"].get<std::string>()).value();
}

TEST(ReconcilePass, TheLeaderCreatesPublishesAndInjects) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  const auto report = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_TRUE(report->ready) << report->not_ready;
  ASSERT_EQ(report->secret_changes.size(), 1u);
  EXPECT_EQ(report->secret_changes[0].action, controller::SecretAction::kCreated);
  EXPECT_TRUE(report->folder_written);
  EXPECT_THAT(report->patched, ::testing::ElementsAre("validatingwebhookconfiguration/hook"));
  EXPECT_EQ(report->leaf_not_after, clock.Now() + 90 * kDay);
  EXPECT_EQ(report->ca_not_after, clock.Now() + 365 * kDay);

  const auto folder = certdir::ReadServingFiles(dir.path()).value().value();
  EXPECT_EQ(folder.tls_crt, Data(api, "tls.crt"));
  EXPECT_EQ(folder.tls_key, Data(api, "tls.key"));
  EXPECT_EQ(folder.ca_crt, Data(api, "ca.crt"));
  EXPECT_EQ(Bundle(api), Data(api, "ca.crt"));
}

TEST(ReconcilePass, ASecondPassWritesNothing) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  api.ClearRequests();
  const auto again = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->ready);
  EXPECT_FALSE(again->folder_written);
  EXPECT_TRUE(again->patched.empty());
  EXPECT_EQ(api.WriteCount(), 0);
}

TEST(ReconcilePass, AMissingTargetIsNotInjectedButNotAFailure) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  const auto waiting = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(waiting) << waiting.error().message();
  // The Secret and the folder are done already; the target's arrival finishes the job.
  EXPECT_TRUE(waiting->ready) << waiting->not_ready;
  EXPECT_FALSE(waiting->injected);
  EXPECT_THAT(waiting->not_injected, HasSubstr("validatingwebhookconfiguration/hook"));
  EXPECT_THAT(waiting->target_bundles, ::testing::ElementsAre(Data(api, "ca.crt")));
  EXPECT_TRUE(certdir::ReadServingFiles(dir.path()).value().has_value());
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  const auto done = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->ready) << done->not_ready;
  EXPECT_TRUE(done->injected) << done->not_injected;
}

// The API server's view: the bundle is injected all the same, and what the target calls is
// judged apart from the certificate, for the leader and for a follower alike.
TEST(ReconcilePass, ANameTheTargetCallsButTheLeafLacksIsACallFinding) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  TempDir follower_dir;
  api.Put(kube::kValidatingWebhookConfigurations,
          testing::WebhookConfiguration(
              "hook", {testing::WebhookEntry("a.hook.io", kNs).Service(kNs, "renamed")}));
  const auto leader = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(leader) << leader.error().message();
  EXPECT_TRUE(leader->ready) << leader->not_ready;
  EXPECT_EQ(Bundle(api), Data(api, "ca.crt"));
  ASSERT_TRUE(leader->call_findings.has_value());
  ASSERT_EQ(leader->call_findings->size(), 1u);
  EXPECT_EQ((*leader->call_findings)[0].code, FindingCode::kTargetNameNotCovered);
  EXPECT_THAT((*leader->call_findings)[0].message, HasSubstr("calls renamed.infra.svc"));
  ASSERT_EQ(leader->targets.size(), 1u);

  const auto follower = Reconcile(api, Config(follower_dir.path()), Role::kFollower, clock);
  ASSERT_TRUE(follower) << follower.error().message();
  EXPECT_TRUE(follower->ready) << follower->not_ready;
  ASSERT_TRUE(follower->call_findings.has_value());
  EXPECT_EQ(follower->call_findings->size(), 1u);

  // Once the target calls the Service the certificate names, nothing is found.
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  const auto fixed = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(fixed && fixed->call_findings.has_value());
  EXPECT_TRUE(fixed->call_findings->empty());
}

TEST(ReconcilePass, AFollowerOnlyReadsAndWaitsForTheLeader) {
  FakeClient api;
  FakeClock clock;
  TempDir leader_dir;
  TempDir follower_dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));

  const auto early = Reconcile(api, Config(follower_dir.path()), Role::kFollower, clock);
  ASSERT_TRUE(early) << early.error().message();
  EXPECT_FALSE(early->ready);
  EXPECT_THAT(early->not_ready, HasSubstr("waiting for the leader to create secret/infra/"));
  EXPECT_EQ(api.WriteCount(), 0);

  ASSERT_TRUE(Reconcile(api, Config(leader_dir.path()), Role::kLeader, clock));
  api.ClearRequests();
  const auto later = Reconcile(api, Config(follower_dir.path()), Role::kFollower, clock);
  ASSERT_TRUE(later);
  EXPECT_TRUE(later->ready) << later->not_ready;
  EXPECT_TRUE(later->folder_written);
  EXPECT_EQ(api.WriteCount(), 0);
  EXPECT_EQ(certdir::ReadServingFiles(follower_dir.path()).value(),
            certdir::ReadServingFiles(leader_dir.path()).value());
}

// What the annotations say about a rotation is no part of readiness: a value certctl does not
// act on is told, and the leader writes it back corrected.
TEST(ReconcilePass, AnUnknownRotationPhaseIsToldNotAReasonToBeUnready) {
  FakeClient api;
  FakeClock clock;
  TempDir leader_dir;
  TempDir follower_dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, Config(leader_dir.path()), Role::kLeader, clock));
  Json secret = api.Object(kube::kSecrets, kNs, kSecret).value();
  secret["metadata"]["annotations"][controller::kRotationPhaseAnnotation] = "stage-7";
  api.Put(kube::kSecrets, secret);

  const auto follower = Reconcile(api, Config(follower_dir.path()), Role::kFollower, clock);
  ASSERT_TRUE(follower) << follower.error().message();
  EXPECT_TRUE(follower->ready) << follower->not_ready;
  ASSERT_EQ(follower->rotation_problems.size(), 1u);
  EXPECT_EQ(follower->rotation_problems[0].value, "stage-7");

  const auto leader = Reconcile(api, Config(leader_dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(leader) << leader.error().message();
  EXPECT_TRUE(leader->ready) << leader->not_ready;
  ASSERT_EQ(leader->secret_changes.size(), 1u);
  EXPECT_EQ(leader->secret_changes[0].action, controller::SecretAction::kRepaired);
  EXPECT_EQ(leader->rotation_problems.size(), 1u);
  EXPECT_FALSE(leader->folder_written);

  api.ClearRequests();
  const auto quiet = Reconcile(api, Config(leader_dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(quiet);
  EXPECT_TRUE(quiet->rotation_problems.empty());
  EXPECT_EQ(api.WriteCount(), 0);
}

// Every replica sees the same target: leaving the Service would not help it, so the
// certificate check holds and only `injected` waits for the leader.
TEST(ReconcilePass, AFollowerIsNotInjectedWhileATargetLacksTheBundle) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));  // re-applied without caBundle
  const auto report = Reconcile(api, Config(dir.path()), Role::kFollower, clock);
  ASSERT_TRUE(report);
  EXPECT_TRUE(report->ready) << report->not_ready;
  EXPECT_FALSE(report->injected);
  EXPECT_THAT(report->not_injected, HasSubstr("waiting for the leader to inject the bundle"));
  EXPECT_THAT(report->not_injected, HasSubstr("validatingwebhookconfiguration/hook"));
  // The serving check trusts what the leader is putting there, not the emptied field.
  EXPECT_THAT(report->target_bundles, ::testing::ElementsAre(Data(api, "ca.crt")));
}

// Due for renewal is the leader's business; a follower without a leader (its lease not yet
// expired) goes on serving the pair until it really expires.
TEST(ReconcilePass, AFollowerStaysReadyWhileTheLeafIsDueForRenewalButNotOnceItExpired) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  clock.Advance(61 * kDay);  // 29 days left, renew_before is 30
  const auto due = Reconcile(api, Config(dir.path()), Role::kFollower, clock);
  ASSERT_TRUE(due);
  EXPECT_TRUE(due->ready) << due->not_ready;
  EXPECT_TRUE(due->injected) << due->not_injected;
  EXPECT_EQ(certdir::ReadServingFiles(dir.path()).value().value().tls_crt, Data(api, "tls.crt"));

  clock.Advance(30 * kDay);  // a day past notAfter
  const auto expired = Reconcile(api, Config(dir.path()), Role::kFollower, clock);
  ASSERT_TRUE(expired);
  EXPECT_FALSE(expired->ready);
  EXPECT_THAT(expired->not_ready, HasSubstr("waiting for the leader to repair"));
  EXPECT_THAT(expired->not_ready, HasSubstr("expired"));
}

std::vector<std::string> LeafNames(const FakeClient& api) {
  return pki::Certificate::FromPem(Data(api, "tls.crt")).value().Info().dns_names;
}

std::string Annotation(const FakeClient& api, const std::string& key) {
  return api.Object(kube::kSecrets, kNs, kSecret)
      .value()["metadata"]["annotations"]
      .value(key, std::string());
}

// A rolling update: the Secret as the old replica, the leader, issued it, and (for one that
// adds --dns-name hook.example.com) the new replica's configuration.
class RollingUpdate : public ::testing::Test {
 protected:
  void SetUp() override {
    api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
    ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
    ca = Data(api, "ca.crt");
    added.secret.identity.extra_dns_names = {"hook.example.com"};
    api.ClearRequests();
  }

  FakeClient api;
  FakeClock clock;
  TempDir dir;
  TempDir new_dir;
  std::string ca;
  PassConfig added = Config(new_dir.path());
};

// The new replica asks for the name in the Secret and waits, not ready; the leader issues
// its own names and the requested one from the same CA; then the new replica serves it.
TEST_F(RollingUpdate, AFollowerWhoseFlagsAddANameAsksTheLeaderForItAndWaits) {
  const std::string leaf = Data(api, "tls.crt");

  const auto asking = Reconcile(api, added, Role::kFollower, clock);
  ASSERT_TRUE(asking) << asking.error().message();
  EXPECT_FALSE(asking->ready);
  EXPECT_THAT(asking->not_ready, HasSubstr("waiting for the leader to issue hook.example.com"));
  EXPECT_EQ(asking->next_step_at, clock.Now() + controller::kNameRequestGrace);
  EXPECT_EQ(api.WriteCount(), 1);
  EXPECT_EQ(Annotation(api, "certctl.io/requested-names"), "hook.example.com");
  EXPECT_EQ(Data(api, "tls.crt"), leaf);
  api.ClearRequests();
  ASSERT_TRUE(Reconcile(api, added, Role::kFollower, clock));
  EXPECT_EQ(api.WriteCount(), 0) << "asked once";

  const auto leader = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(leader && leader->ready) << (leader ? leader->not_ready : "");
  EXPECT_THAT(LeafNames(api), ::testing::Contains("hook.example.com"));
  EXPECT_EQ(LeafNames(api).front(), "hook." + std::string(kNs) + ".svc") << "its own name first";
  EXPECT_EQ(Data(api, "ca.crt"), ca);

  const auto served = Reconcile(api, added, Role::kFollower, clock);
  ASSERT_TRUE(served) << served.error().message();
  EXPECT_TRUE(served->ready) << served->not_ready;
  EXPECT_TRUE(served->names_awaited.empty());
  EXPECT_EQ(certdir::ReadServingFiles(new_dir.path()).value().value().tls_crt,
            Data(api, "tls.crt"));
  api.ClearRequests();
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  EXPECT_EQ(api.WriteCount(), 0) << "the leader's own flags are still covered";
}

// A leader that does not read requests (an older certctl) never issues the name: past the
// grace the new replica serves the pair as it is (no target calls the name), saying which
// name it awaits; once it leads, it issues the name from the same CA.
TEST_F(RollingUpdate, AFollowerWhoseRequestGoesUnansweredServesThePairTheLeaderIssued) {
  ASSERT_FALSE(Reconcile(api, added, Role::kFollower, clock)->ready);
  clock.Advance(controller::kNameRequestGrace);
  api.ClearRequests();
  const auto follower = Reconcile(api, added, Role::kFollower, clock);
  ASSERT_TRUE(follower) << follower.error().message();
  EXPECT_TRUE(follower->ready) << follower->not_ready;
  EXPECT_TRUE(follower->injected) << follower->not_injected;
  ASSERT_TRUE(follower->call_findings.has_value());
  EXPECT_TRUE(follower->call_findings->empty());
  EXPECT_THAT(follower->names_awaited, HasSubstr("\"hook.example.com\""));
  EXPECT_THAT(follower->names_awaited, HasSubstr("the leader has not issued them"));
  EXPECT_EQ(certdir::ReadServingFiles(new_dir.path()).value().value().tls_crt,
            Data(api, "tls.crt"));
  EXPECT_EQ(api.WriteCount(), 0);

  const auto leading = Reconcile(api, added, Role::kLeader, clock);
  ASSERT_TRUE(leading) << leading.error().message();
  EXPECT_TRUE(leading->ready) << leading->not_ready;
  EXPECT_TRUE(leading->names_awaited.empty());
  EXPECT_THAT(LeafNames(api), ::testing::Contains("hook.example.com"));
  EXPECT_EQ(Data(api, "ca.crt"), ca);

  // A name a target calls is not served before it is issued: that is a call finding.
  api.Put(kube::kValidatingWebhookConfigurations,
          testing::WebhookConfiguration(
              "hook", {testing::WebhookEntry("a.hook.io", kNs).Service(kNs, "renamed")}));
  PassConfig renamed = Config(new_dir.path());
  renamed.secret.identity.service = "renamed";
  ASSERT_FALSE(Reconcile(api, renamed, Role::kFollower, clock)->ready);
  clock.Advance(controller::kNameRequestGrace);
  const auto waiting = Reconcile(api, renamed, Role::kFollower, clock);
  ASSERT_TRUE(waiting && waiting->call_findings.has_value());
  ASSERT_EQ(waiting->call_findings->size(), 1u);
  EXPECT_EQ((*waiting->call_findings)[0].code, FindingCode::kTargetNameNotCovered);
}

// A request is honoured for an hour, names that cannot be issued left out and told; after
// that the leader issues for its own flags alone again.
TEST_F(RollingUpdate, TheLeaderHonoursARequestForAnHourAndLeavesOutWhatCannotBeIssued) {
  Json secret = api.Object(kube::kSecrets, kNs, kSecret).value();
  secret["metadata"]["annotations"]["certctl.io/requested-names"] =
      "new.example.com, not a name, 10.0.0.7";
  secret["metadata"]["annotations"]["certctl.io/names-requested-at"] = FormatRfc3339(clock.Now());
  api.Put(kube::kSecrets, secret);
  const auto honoured = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(honoured && honoured->ready) << (honoured ? honoured->not_ready : "");
  const pki::CertificateInfo info = pki::Certificate::FromPem(Data(api, "tls.crt")).value().Info();
  EXPECT_THAT(info.dns_names, ::testing::Contains("new.example.com"));
  EXPECT_THAT(info.ip_addresses, ::testing::ElementsAre("10.0.0.7"));
  ASSERT_EQ(honoured->rotation_problems.size(), 1u);
  EXPECT_EQ(honoured->rotation_problems[0].annotation, "certctl.io/requested-names");
  EXPECT_THAT(honoured->rotation_problems[0].message, HasSubstr("\"not a name\""));

  // Past the hour the next issue (here a damaged tls.crt) names the flags' own alone.
  clock.Advance(controller::kNameRequestLifetime + 1s);
  secret = api.Object(kube::kSecrets, kNs, kSecret).value();
  secret["data"]["tls.crt"] = Base64Encode("garbage");
  api.Put(kube::kSecrets, secret);
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  EXPECT_THAT(LeafNames(api), ::testing::Not(::testing::Contains("new.example.com")));
}

// A rename with no leader election (the chart's default with one replica): the new pod leads
// with the new name while the old one still runs and the targets call the old name. Its
// leaf keeps the Service the targets call, so the old pod finds its own names covered and
// writes nothing (no fight), and calls go on. Once no target calls it, the next new leaf
// leaves it out.
TEST_F(RollingUpdate, ANewLeafKeepsTheNamesTheTargetsStillCall) {
  const std::string old_name = "hook." + std::string(kNs) + ".svc";
  PassConfig renamed = Config(new_dir.path());
  renamed.secret.identity.service = "renamed";

  const auto issued = Reconcile(api, renamed, Role::kLeader, clock);
  ASSERT_TRUE(issued && issued->ready) << (issued ? issued->not_ready : "");
  EXPECT_EQ(LeafNames(api).front(), "renamed." + std::string(kNs) + ".svc");
  EXPECT_THAT(LeafNames(api), ::testing::Contains(old_name));
  EXPECT_THAT(LeafNames(api), ::testing::Contains("hook")) << "the Service's every form";
  EXPECT_EQ(Data(api, "ca.crt"), ca);
  api.ClearRequests();
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  EXPECT_EQ(api.WriteCount(), 0) << "the old pod's name is still there";

  api.Put(kube::kValidatingWebhookConfigurations,
          testing::WebhookConfiguration(
              "hook", {testing::WebhookEntry("a.hook.io", kNs).Service(kNs, "renamed")}));
  Json secret = api.Object(kube::kSecrets, kNs, kSecret).value();
  secret["data"]["tls.crt"] = Base64Encode("garbage");
  api.Put(kube::kSecrets, secret);
  ASSERT_TRUE(Reconcile(api, renamed, Role::kLeader, clock));
  EXPECT_THAT(LeafNames(api), ::testing::Not(::testing::Contains(old_name)));
}

// The Secret made for hook, taken over by a leader for hook-b: the target now calls hook-b,
// while "other" (no target) still calls hook trusting the Secret's CA.
struct SharedSecret {
  SharedSecret() {
    api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
    EXPECT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
    api.Put(kube::kValidatingWebhookConfigurations,
            testing::WebhookConfiguration("hook", {testing::WebhookEntry("a.hook.io", kNs)
                                                       .Service(kNs, "hook-b")
                                                       .Bundle(Data(api, "ca.crt"))}));
    api.Put(kube::kValidatingWebhookConfigurations,
            testing::WebhookConfiguration("other", {testing::WebhookEntry("o.hook.io", kNs)
                                                        .Service(kNs, "hook")
                                                        .Bundle(Data(api, "ca.crt"))}));
    config.secret.identity.service = "hook-b";
  }

  FakeClient api;
  FakeClock clock;
  TempDir dir;
  PassConfig config = Config(dir.path());
};

TEST(ReconcilePass, ALeafDroppingANameAnotherWebhookCallsIsIssuedAndTheCallerTold) {
  SharedSecret cluster;
  const std::string before = Data(cluster.api, "tls.crt");

  const auto report = Reconcile(cluster.api, cluster.config, Role::kLeader, cluster.clock);

  ASSERT_TRUE(report) << report.error().message();
  EXPECT_TRUE(report->ready) << report->not_ready;
  EXPECT_NE(Data(cluster.api, "tls.crt"), before);
  ASSERT_EQ(report->other_callers.size(), 1u);
  EXPECT_EQ(report->other_callers[0].Describe(),
            "validatingwebhookconfiguration/other webhooks[0] (o.hook.io) calls hook.infra.svc");
  EXPECT_FALSE(report->other_callers_not_looked);
}

TEST(ReconcilePass, NotAllowedToLookForOtherCallersThePassGoesOnAsBefore) {
  SharedSecret cluster;
  cluster.api.InjectFailure(testing::Verb::kList, kube::kValidatingWebhookConfigurations,
                            Error(ErrorCode::kPermissionDenied, "forbidden"));

  const auto report = Reconcile(cluster.api, cluster.config, Role::kLeader, cluster.clock);

  ASSERT_TRUE(report) << report.error().message();
  EXPECT_TRUE(report->ready) << report->not_ready;
  EXPECT_TRUE(report->other_callers.empty());
  ASSERT_TRUE(report->other_callers_not_looked);
  EXPECT_EQ(report->other_callers_not_looked->code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(cluster.api.CountOf(testing::Verb::kList, kube::kValidatingWebhookConfigurations), 1);
}

// What `certctl rotate --ca` leaves on the Secret for the controller.
void RequestCaRotation(FakeClient& api) {
  Json secret = api.Object(kube::kSecrets, kNs, kSecret).value();
  secret["metadata"]["annotations"]["certctl.io/rotate"] = "ca";
  api.Put(kube::kSecrets, secret);
}

// `config` with the leader's memory across passes, as the sidecar gives it.
PassConfig Remembering(PassConfig config, BundleHold& hold, const FakeClock& clock) {
  config.bundle_held_since = [&hold, &clock](const std::string& bundle, bool written) {
    return hold.Since(bundle, written, clock.Now());
  };
  return config;
}

TEST(ReconcilePass, ARequestedCaRotationMovesTheLeafOnceTheBundleHadTimeToPropagate) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  BundleHold hold;
  const PassConfig config = Remembering(Config(dir.path()), hold, clock);
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, config, Role::kLeader, clock));
  const std::string old_ca = Data(api, "ca.crt");
  const std::string old_leaf = Data(api, "tls.crt");
  RequestCaRotation(api);
  api.ClearRequests();

  // Step 1 and the bundle: ready (both CAs trusted, the previous CA's leaf served), and due
  // again once the API servers' caches had time to see the bundle.
  const auto trusting = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(trusting) << trusting.error().message();
  EXPECT_TRUE(trusting->ready) << trusting->not_ready;
  ASSERT_EQ(trusting->secret_changes.size(), 1u);
  EXPECT_EQ(trusting->secret_changes[0].action, controller::SecretAction::kCaRotationStarted);
  EXPECT_EQ(trusting->rotation, controller::RotationPhase::kTrusting);
  EXPECT_EQ(trusting->next_step_at, clock.Now() + controller::kBundlePropagation);
  EXPECT_EQ(Data(api, "tls.crt"), old_leaf);

  // A pass before then changes nothing; one at that time takes step 2.
  clock.Advance(controller::kBundlePropagation - 1s);
  const auto early = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(early) << early.error().message();
  EXPECT_TRUE(early->secret_changes.empty());
  EXPECT_EQ(early->next_step_at, trusting->next_step_at);
  clock.Advance(1s);
  const auto report = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_TRUE(report->ready) << report->not_ready;
  ASSERT_EQ(report->secret_changes.size(), 1u);
  EXPECT_EQ(report->secret_changes[0].action, controller::SecretAction::kLeafMovedToNewCa);
  EXPECT_EQ(report->rotation, controller::RotationPhase::kOverlapping);
  EXPECT_EQ(report->next_step_at, clock.Now() + 24h);  // the default overlap

  // The order on the wire: the Secret (step 1), the bundle, read-backs of the target, then
  // the leaf (step 2).
  std::vector<std::string> writes;
  for (const auto& request : api.Requests()) {
    if (request.verb == certctl::testing::Verb::kUpdate) {
      writes.push_back("update secret");
    } else if (request.verb == certctl::testing::Verb::kPatch) {
      writes.push_back("patch vwc");
    }
  }
  EXPECT_THAT(writes, ::testing::ElementsAre("update secret", "patch vwc", "update secret"));
  const std::string bundle = Data(api, "ca.crt");
  EXPECT_EQ(Bundle(api), bundle);
  EXPECT_THAT(bundle, HasSubstr(old_ca.substr(0, old_ca.size() - 30)));
  EXPECT_NE(bundle, old_ca);
  const auto folder = certdir::ReadServingFiles(dir.path()).value().value();
  EXPECT_EQ(folder.tls_crt, Data(api, "tls.crt"));
  EXPECT_EQ(folder.ca_crt, bundle);

  // Step 3 once the overlap is over: the bundle is the new CA alone, everywhere.
  clock.Advance(24h);
  const auto retired = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(retired) << retired.error().message();
  ASSERT_EQ(retired->secret_changes.size(), 1u);
  EXPECT_EQ(retired->secret_changes[0].action, controller::SecretAction::kPreviousCaRetired);
  EXPECT_EQ(retired->rotation, controller::RotationPhase::kNone);
  EXPECT_FALSE(retired->next_step_at);
  EXPECT_THAT(Data(api, "ca.crt"), ::testing::Not(HasSubstr(old_ca.substr(30, 40))));
  EXPECT_EQ(Bundle(api), Data(api, "ca.crt"));
}

TEST(ReconcilePass, ABundleRewrittenDuringThePropagationWaitStartsTheWaitOver) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  BundleHold hold;
  const PassConfig config = Remembering(Config(dir.path()), hold, clock);
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, config, Role::kLeader, clock));
  RequestCaRotation(api);
  ASSERT_TRUE(Reconcile(api, config, Role::kLeader, clock));

  clock.Advance(controller::kBundlePropagation - 1s);
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));  // re-applied without caBundle
  const auto rewritten = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(rewritten) << rewritten.error().message();
  EXPECT_TRUE(rewritten->secret_changes.empty());
  EXPECT_EQ(rewritten->next_step_at, clock.Now() + controller::kBundlePropagation);

  clock.Advance(controller::kBundlePropagation);
  const auto moved = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(moved) << moved.error().message();
  ASSERT_EQ(moved->secret_changes.size(), 1u);
  EXPECT_EQ(moved->secret_changes[0].action, controller::SecretAction::kLeafMovedToNewCa);
}

TEST(ReconcilePass, WithoutMemoryAcrossPassesTheLeafStaysWithThePreviousCa) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  const std::string old_leaf = Data(api, "tls.crt");
  RequestCaRotation(api);
  for (int pass = 0; pass < 3; ++pass) {
    const auto report = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
    ASSERT_TRUE(report) << report.error().message();
    EXPECT_TRUE(report->ready) << report->not_ready;
    EXPECT_EQ(report->rotation, controller::RotationPhase::kTrusting);
    clock.Advance(controller::kBundlePropagation);
  }
  EXPECT_EQ(Data(api, "tls.crt"), old_leaf);
}

TEST(ReconcilePass, AFollowerStaysReadyWhileARotationWaitsForTheTargets) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  // The leaf is due for renewal, and a CA rotation was started (the job's secret phase
  // without targets stops after step 1): the follower judges the leaf by whether it serves.
  clock.Advance(61 * kDay);
  RequestCaRotation(api);
  auto secret = controller::EnsureSecret(api, Config(dir.path()).secret, clock);
  ASSERT_TRUE(secret) << secret.error().message();
  ASSERT_EQ(secret->action, controller::SecretAction::kCaRotationStarted);

  const auto report = Reconcile(api, Config(dir.path()), Role::kFollower, clock);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_TRUE(report->ready) << report->not_ready;
  EXPECT_EQ(report->rotation, controller::RotationPhase::kTrusting);
}

TEST(ReconcilePass, AnUnwritableFolderIsAnErrorNamingIt) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  dir.Write("blocked", "a file");
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  const auto report = Reconcile(api, Config(dir / "blocked/tls"), Role::kLeader, clock);
  // The Secret was created before the folder failed: the pass fails, and says what it wrote.
  ASSERT_TRUE(report);
  ASSERT_TRUE(report->failure);
  EXPECT_FALSE(report->ready);
  EXPECT_EQ(report->failure->code(), ErrorCode::kIo);
  EXPECT_THAT(report->failure->message(), HasSubstr((dir / "blocked").string()));
  ASSERT_EQ(report->secret_changes.size(), 1u);
  EXPECT_EQ(report->secret_changes[0].action, controller::SecretAction::kCreated);

  // Nothing written, the same failure is a plain error.
  const auto again = Reconcile(api, Config(dir / "blocked/tls"), Role::kLeader, clock);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kIo);
}

// A folder that takes no new set (a read-only mount) keeps the pod serving what it holds
// while the Secret's CA bundle trusts it, and only then.
TEST(ReconcilePass, AnUnwritableFolderServesItsSetWhileTheSecretStillTrustsIt) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  ASSERT_TRUE(Reconcile(api, Config(dir.path()), Role::kLeader, clock));
  const std::string served = Data(api, "tls.crt");
  // A directory where the ..data link is staged: every swap now fails, even for root.
  dir.Write("..data_tmp/blocker", "x");

  clock.Advance(61 * kDay);  // the leader re-issues the leaf; the folder keeps the old one
  const auto renewed = Reconcile(api, Config(dir.path()), Role::kLeader, clock);
  ASSERT_TRUE(renewed) << renewed.error().message();
  EXPECT_FALSE(renewed->failure);
  EXPECT_NE(Data(api, "tls.crt"), served);
  EXPECT_TRUE(renewed->ready) << renewed->not_ready;
  EXPECT_THAT(renewed->folder_stale, HasSubstr("..data_tmp"));
  EXPECT_EQ(certdir::ReadServingFiles(dir.path()).value().value().tls_crt, served);

  clock.Advance(30 * kDay);  // the set the folder holds has expired
  const auto expired = Reconcile(api, Config(dir.path()), Role::kFollower, clock);
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.error().code(), ErrorCode::kIo);
  EXPECT_THAT(expired.error().message(), HasSubstr("the set it holds does not serve"));
  EXPECT_THAT(expired.error().message(), HasSubstr("expired"));
}

TEST(ReconcilePass, AHeldBackTargetIsLeftAsItIsAndThePassIsNotInjected) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  PassConfig config = Config(dir.path());
  ASSERT_TRUE(Reconcile(api, config, Role::kLeader, clock));
  Json vwc = api.Object(kube::kValidatingWebhookConfigurations, "", "hook").value();
  vwc["webhooks"][0]["clientConfig"]["caBundle"] = Base64Encode("another writer's");
  api.Put(kube::kValidatingWebhookConfigurations, vwc);
  api.ClearRequests();

  config.hold_back = [](const std::string& object, const controller::TargetObject&) {
    return object == "validatingwebhookconfiguration/hook";
  };
  const auto held = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_TRUE(held->ready) << held->not_ready;
  EXPECT_FALSE(held->injected);
  EXPECT_THAT(held->held_back, ::testing::ElementsAre("validatingwebhookconfiguration/hook"));
  EXPECT_THAT(held->not_injected, HasSubstr("another writer keeps changing the caBundle of "
                                            "validatingwebhookconfiguration/hook"));
  EXPECT_THAT(held->target_bundles, ::testing::ElementsAre(Data(api, "ca.crt")));
  EXPECT_TRUE(held->patched.empty());
  EXPECT_EQ(api.WriteCount(), 0);
  EXPECT_EQ(Bundle(api), "another writer's");

  // Held back only while it differs: a target holding the bundle is no reason to wait.
  config.hold_back = nullptr;
  ASSERT_TRUE(Reconcile(api, config, Role::kLeader, clock));
  config.hold_back = [](const std::string&, const controller::TargetObject&) { return true; };
  const auto steady = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(steady);
  EXPECT_TRUE(steady->ready) << steady->not_ready;
  EXPECT_TRUE(steady->held_back.empty());
}

TEST(ReconcilePass, AHeldBackSecretRepairLeavesTheSecretAndTheFolderAndIsNotReady) {
  FakeClient api;
  FakeClock clock;
  TempDir dir;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc("hook"));
  PassConfig config = Config(dir.path());
  const auto first = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->secret_data,
            api.Object(kube::kSecrets, kNs, kSecret).value()["data"].get<StringMap>());
  const auto served = certdir::ReadServingFiles(dir.path()).value().value();
  Json secret = api.Object(kube::kSecrets, kNs, kSecret).value();
  secret["data"]["tls.crt"] = Base64Encode("another writer's");
  api.Put(kube::kSecrets, secret);
  api.ClearRequests();

  config.secret_hold_back = [](const Json&) { return true; };
  const auto held = Reconcile(api, config, Role::kLeader, clock);
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_FALSE(held->ready);
  EXPECT_THAT(held->not_ready, HasSubstr("another writer keeps changing "
                                         "secret/infra/webhook-server-cert"));
  EXPECT_THAT(held->held_back, ::testing::ElementsAre("secret/infra/webhook-server-cert"));
  EXPECT_TRUE(held->secret_changes.empty());
  EXPECT_TRUE(held->secret_data.empty());
  EXPECT_EQ(api.WriteCount(), 0);
  EXPECT_EQ(Data(api, "tls.crt"), "another writer's");
  EXPECT_EQ(certdir::ReadServingFiles(dir.path()).value().value().tls_crt, served.tls_crt);
}

}  // namespace
}  // namespace pass_test
}  // namespace certctl::loop
