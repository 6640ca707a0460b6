#include "certctl/controller/ensure_secret.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/controller/secret.h"
#include "certctl/controller/targets.h"
#include "certctl/pki/certificate.h"
#include "certctl/pki/issue.h"
#include "certctl/util/base64.h"
#include "certctl/util/duration.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"
#include "support/target_objects.h"
#include "support/test_pki.h"

namespace certctl::controller {
namespace ensure_secret_test {
namespace {

using StringMap = std::map<std::string, std::string>;
using Json = nlohmann::json;
using certctl::testing::CaBuilder;
using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::KeyPem;
using certctl::testing::LeafBuilder;
using certctl::testing::SecretBuilder;
using certctl::testing::Verb;
using kube::kSecrets;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr char kNs[] = "webhooks";
constexpr char kName[] = "webhook-server-cert";
constexpr char kObject[] = "secret/webhooks/webhook-server-cert";
constexpr std::chrono::hours kDay{24};

// The contract's SAN list for --service svc in namespace webhooks, written out by hand.
const std::vector<std::string> kSans = {"svc.webhooks.svc", "svc", "svc.webhooks",
                                        "svc.webhooks.svc.cluster.local"};

SecretSpec Spec() {
  SecretSpec spec;
  spec.ns = kNs;
  spec.name = kName;
  spec.identity.service = "svc";
  spec.identity.namespace_name = kNs;
  spec.ca.common_name = "svc-ca";
  spec.ca.validity = 365 * kDay;
  spec.leaf_validity = 90 * kDay;
  return spec;
}

// A kube::Client over a FakeClient that lets another writer act once, just before the first
// call of `verb` reaches the server: the way a test puts a race between a read and a write.
class InterposingClient final : public kube::Client {
 public:
  InterposingClient(FakeClient& fake, Verb verb, std::function<void(FakeClient&)> other_writer)
      : fake_(fake), verb_(verb), other_writer_(std::move(other_writer)) {}

  Result<std::optional<Json>> Get(const kube::ResourceType& type, std::string_view ns,
                                  std::string_view name) override {
    Before(Verb::kGet);
    return fake_.Get(type, ns, name);
  }
  Result<Json> List(const kube::ResourceType& type, std::string_view ns,
                    const kube::ListOptions& options) override {
    Before(Verb::kList);
    return fake_.List(type, ns, options);
  }
  Result<Json> Create(const kube::ResourceType& type, std::string_view ns,
                      const Json& object) override {
    Before(Verb::kCreate);
    return fake_.Create(type, ns, object);
  }
  Result<Json> Update(const kube::ResourceType& type, std::string_view ns, std::string_view name,
                      const Json& object) override {
    Before(Verb::kUpdate);
    return fake_.Update(type, ns, name, object);
  }
  Result<Json> Patch(const kube::ResourceType& type, std::string_view ns, std::string_view name,
                     kube::PatchType patch_type, const Json& patch) override {
    Before(Verb::kPatch);
    return fake_.Patch(type, ns, name, patch_type, patch);
  }
  Status Delete(const kube::ResourceType& type, std::string_view ns,
                std::string_view name) override {
    Before(Verb::kDelete);
    return fake_.Delete(type, ns, name);
  }
  Status Watch(const kube::ResourceType& type, std::string_view ns,
               const kube::WatchOptions& options,
               const std::function<bool(const kube::WatchEvent&)>& on_event,
               const std::function<bool()>& cancelled) override {
    Before(Verb::kWatch);
    return fake_.Watch(type, ns, options, on_event, cancelled);
  }

  bool acted() const { return acted_; }

 private:
  void Before(Verb verb) {
    if (verb == verb_ && !acted_) {
      acted_ = true;
      other_writer_(fake_);
    }
  }

  FakeClient& fake_;
  Verb verb_;
  std::function<void(FakeClient&)> other_writer_;
  bool acted_ = false;
};

pki::KeyPair MustCa(const std::string& name, TimePoint now,
                    std::chrono::seconds validity = 365 * kDay) {
  return CaBuilder(name).At(now).Validity(validity).Build();
}

pki::KeyPair MustLeaf(const pki::KeyPair& ca, const std::vector<std::string>& sans, TimePoint now) {
  return LeafBuilder(ca).At(now).DnsNames(sans).Build();
}

// A Secret another tool made: no certctl label (cert-manager's instead), no ca.key.
Json ExternalSecret(const pki::KeyPair& ca, const pki::KeyPair& leaf) {
  return SecretBuilder(kNs, kName)
      .Pair(ca, leaf)
      .Without("ca.key")
      .Labels({{kManagedByLabel, "cert-manager"}, {"team", "platform"}});
}

// A Secret certctl made earlier (or another certctl replica just made), with ca.key.
Json ManagedSecret(const pki::KeyPair& ca, const pki::KeyPair& leaf) {
  return SecretBuilder(kNs, kName).Pair(ca, leaf);
}

Json Stored(const FakeClient& client) {
  auto secret = client.Object(kSecrets, kNs, kName);
  EXPECT_TRUE(secret.has_value()) << "the Secret is absent";
  return secret.value_or(Json::object());
}

// data[key], decoded.
std::string DataOf(const Json& secret, const std::string& key) {
  const Json::json_pointer pointer("/data/" + key);
  if (!secret.contains(pointer)) {
    ADD_FAILURE() << "no data." << key;
    return "";
  }
  auto decoded = Base64Decode(secret.at(pointer).get<std::string>());
  EXPECT_TRUE(decoded.has_value()) << decoded.error().message();
  return decoded.value_or("");
}

std::vector<std::string> DataKeys(const Json& secret) {
  std::vector<std::string> keys;
  for (const auto& item : secret["data"].items()) {
    keys.push_back(item.key());
  }
  return keys;
}

std::vector<pki::Certificate> Certificates(const std::string& pem) {
  auto certificates = pki::ParseCertificateBundle(pem);
  EXPECT_TRUE(certificates.has_value()) << certificates.error().message();
  return certificates.value_or(std::vector<pki::Certificate>());
}

pki::Certificate Leaf(const Json& secret) {
  auto leaf = pki::Certificate::FromPem(DataOf(secret, "tls.crt"));
  EXPECT_TRUE(leaf.has_value()) << leaf.error().message();
  return *leaf;
}

// Validates what is stored with a policy written out here, optionally trusting only
// `trusted` (a PEM bundle) instead of the Secret's own ca.crt.
pki::ValidationReport ValidateStored(const Json& secret, const std::vector<std::string>& sans,
                                     TimePoint now, const std::string& trusted = "") {
  pki::PairSource source;
  source.ca_pem = trusted.empty() ? DataOf(secret, "ca.crt") : trusted;
  source.cert_pem = DataOf(secret, "tls.crt");
  source.key_pem = DataOf(secret, "tls.key");
  if (secret["data"].contains("ca.key")) {
    source.ca_key_pem = DataOf(secret, "ca.key");
  }
  pki::ValidationPolicy policy;
  policy.dns_names = sans;
  return pki::Validate(source, policy, now);
}

std::string Findings(const pki::ValidationReport& report) {
  std::string text;
  for (const Finding& finding : report.AllFindings()) {
    text += finding.object + ": " + finding.message + "\n";
  }
  return text;
}

Result<SecretOutcome> MustEnsure(kube::Client& client, const SecretSpec& spec,
                                 const FakeClock& clock) {
  auto outcome = EnsureSecret(client, spec, clock);
  EXPECT_TRUE(outcome.has_value()) << outcome.error().message();
  return outcome;
}

// A cluster in which certctl already created the Secret for Spec().
struct Created {
  Created() {
    auto outcome = EnsureSecret(client, Spec(), clock);
    EXPECT_TRUE(outcome.has_value()) << outcome.error().message();
    EXPECT_EQ(outcome->action, SecretAction::kCreated);
    before = Stored(client);
    client.ClearRequests();
  }

  FakeClock clock;
  FakeClient client;
  Json before;
};

TEST(EnsureSecret, CreatesAManagedTlsSecretInAnEmptyCluster) {
  FakeClock clock;
  FakeClient client;
  auto outcome = EnsureSecret(client, Spec(), clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->action, SecretAction::kCreated);
  EXPECT_TRUE(outcome->managed);
  EXPECT_TRUE(outcome->validation.ok());

  const Json secret = Stored(client);
  EXPECT_EQ(secret["type"], "kubernetes.io/tls");
  EXPECT_THAT(DataKeys(secret), UnorderedElementsAre("ca.crt", "ca.key", "tls.crt", "tls.key"));
  EXPECT_EQ(secret["metadata"]["labels"]["app.kubernetes.io/managed-by"], "certctl");
  EXPECT_EQ(outcome->ca_bundle, DataOf(secret, "ca.crt"));
  EXPECT_EQ(outcome->tls_crt, DataOf(secret, "tls.crt"));
  EXPECT_EQ(outcome->tls_key, DataOf(secret, "tls.key"));

  const pki::ValidationReport report = ValidateStored(secret, kSans, clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
  EXPECT_THAT(Leaf(secret).Info().dns_names, ElementsAreArray(kSans));
  ASSERT_EQ(Certificates(outcome->ca_bundle).size(), 1u);
  EXPECT_EQ(Certificates(outcome->ca_bundle)[0].Info().common_name, "svc-ca");

  EXPECT_EQ(client.WriteCount(), 1);
  EXPECT_EQ(client.CountOf(Verb::kCreate, kSecrets, kName), 1);
}

TEST(EnsureSecret, SecondRunWritesNothing) {
  Created cluster;
  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kNone);
  EXPECT_TRUE(outcome->managed);
  EXPECT_TRUE(outcome->reason.empty()) << outcome->reason;
  EXPECT_EQ(outcome->ca_bundle, DataOf(cluster.before, "ca.crt"));
  EXPECT_EQ(outcome->tls_crt, DataOf(cluster.before, "tls.crt"));
  EXPECT_EQ(outcome->tls_key, DataOf(cluster.before, "tls.key"));
  EXPECT_EQ(cluster.client.WriteCount(), 0);
  EXPECT_EQ(cluster.client.ReadCount(), 1);
  EXPECT_EQ(Stored(cluster.client), cluster.before);
}

TEST(EnsureSecret, RenamedServiceReissuesOnlyTheLeaf) {
  Created cluster;
  SecretSpec spec = Spec();
  spec.identity.service = "svc2";
  auto outcome = MustEnsure(cluster.client, spec, cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  EXPECT_THAT(outcome->reason, HasSubstr("svc2"));
  // What callers of the old name meet now is told (another webhook may share the Secret).
  EXPECT_THAT(outcome->names_dropped, ElementsAre("svc.webhooks.svc", "svc", "svc.webhooks",
                                                  "svc.webhooks.svc.cluster.local"));

  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"]["ca.crt"], cluster.before["data"]["ca.crt"]);
  EXPECT_EQ(after["data"]["ca.key"], cluster.before["data"]["ca.key"]);
  EXPECT_NE(after["data"]["tls.crt"], cluster.before["data"]["tls.crt"]);
  EXPECT_NE(after["data"]["tls.key"], cluster.before["data"]["tls.key"]);
  EXPECT_EQ(outcome->ca_bundle, DataOf(cluster.before, "ca.crt"));
  EXPECT_EQ(outcome->tls_crt, DataOf(after, "tls.crt"));
  EXPECT_EQ(outcome->tls_key, DataOf(after, "tls.key"));

  const std::vector<std::string> sans = {"svc2.webhooks.svc", "svc2", "svc2.webhooks",
                                         "svc2.webhooks.svc.cluster.local"};
  const pki::ValidationReport report = ValidateStored(after, sans, cluster.clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
  EXPECT_THAT(Leaf(after).Info().dns_names, ElementsAreArray(sans));
  EXPECT_EQ(cluster.client.WriteCount(), 1);

  // And the new state is steady.
  cluster.client.ClearRequests();
  auto again = MustEnsure(cluster.client, spec, cluster.clock);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->action, SecretAction::kNone);
  EXPECT_EQ(cluster.client.WriteCount(), 0);
}

TEST(EnsureSecret, LeafWithinRenewBeforeIsReissuedFromTheStoredCa) {
  Created cluster;  // leaf valid for 90 days, renew_before 30 days
  cluster.clock.Advance(59 * kDay);
  auto early = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->action, SecretAction::kNone);
  EXPECT_EQ(cluster.client.WriteCount(), 0);

  cluster.clock.Advance(2 * kDay);  // 29 days left
  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->names_dropped.empty());  // a renewal keeps every name
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"]["ca.crt"], cluster.before["data"]["ca.crt"]);
  EXPECT_EQ(after["data"]["ca.key"], cluster.before["data"]["ca.key"]);
  EXPECT_EQ(Leaf(after).Info().not_after, cluster.clock.Now() + 90 * kDay);
  const pki::ValidationReport report = ValidateStored(after, kSans, cluster.clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
  EXPECT_EQ(cluster.client.WriteCount(), 1);
}

TEST(EnsureSecret, AnExpiringCaWhoseLeafNoLongerServesIsReplacedAtOnce) {
  Created cluster;  // CA valid for 365 days, leaf for 90
  const std::vector<pki::Certificate> old_cas = Certificates(DataOf(cluster.before, "ca.crt"));
  ASSERT_EQ(old_cas.size(), 1u);
  cluster.clock.Advance(340 * kDay);  // the CA has 25 days left, the leaf expired long ago

  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  // Nothing the server holds is served successfully: no step would gain anything.
  EXPECT_EQ(outcome->action, SecretAction::kCaReplaced);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(outcome->ca_bundle, DataOf(after, "ca.crt"));
  const std::vector<pki::Certificate> bundle = Certificates(outcome->ca_bundle);
  ASSERT_EQ(bundle.size(), 1u);
  EXPECT_FALSE(bundle[0] == old_cas[0]);
  EXPECT_EQ(bundle[0].Info().not_after, cluster.clock.Now() + 365 * kDay);
  EXPECT_NE(after["data"]["ca.key"], cluster.before["data"]["ca.key"]);
  EXPECT_FALSE(after["metadata"].contains("annotations"));
  const pki::ValidationReport report = ValidateStored(after, kSans, cluster.clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
  EXPECT_EQ(cluster.client.WriteCount(), 1);
}

TEST(EnsureSecret, ExpiredCaIsReplacedAndDropped) {
  Created cluster;
  const std::vector<pki::Certificate> old_cas = Certificates(DataOf(cluster.before, "ca.crt"));
  ASSERT_EQ(old_cas.size(), 1u);
  cluster.clock.Advance(400 * kDay);

  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kCaReplaced);
  const std::vector<pki::Certificate> bundle = Certificates(outcome->ca_bundle);
  ASSERT_EQ(bundle.size(), 1u);
  EXPECT_FALSE(bundle[0] == old_cas[0]);
  const pki::ValidationReport report =
      ValidateStored(Stored(cluster.client), kSans, cluster.clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
}

std::string AnnotationOf(const Json& secret, const std::string& key) {
  const Json& metadata = secret["metadata"];
  if (!metadata.contains("annotations") || !metadata["annotations"].contains(key)) {
    return "";
  }
  return metadata["annotations"][key].get<std::string>();
}

// The invariant at the Secret's level: the leaf it stores verifies against the bundle it
// stores (what the targets are given), and against every bundle stored before it moved.
void ExpectLeafTrustedBy(const Json& secret, const std::string& bundle, TimePoint now) {
  pki::ValidationPolicy policy;
  policy.dns_names = kSans;
  policy.renew_before = std::chrono::seconds(0);
  pki::PairSource source;
  source.ca_pem = bundle;
  source.cert_pem = DataOf(secret, "tls.crt");
  source.key_pem = DataOf(secret, "tls.key");
  const pki::ValidationReport report = pki::Validate(source, policy, now);
  EXPECT_TRUE(report.ok()) << Findings(report);
}

TEST(EnsureSecret, AnExpiringCaIsRotatedInStepsThatNeverServeAnUntrustedLeaf) {
  FakeClock clock;
  FakeClient client;
  // A CA with less than renew_before (30 days) left, and a leaf it issued that still serves.
  const pki::KeyPair old_ca = MustCa("svc-ca", clock.Now(), 20 * kDay);
  const Json before =
      client.Put(kSecrets, ManagedSecret(old_ca, MustLeaf(old_ca, kSans, clock.Now())));

  // Step 1: a new CA next to the old one; the leaf stays.
  auto started = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->action, SecretAction::kCaRotationStarted);
  EXPECT_EQ(started->rotation.phase, RotationPhase::kTrusting);
  Json stored = Stored(client);
  const std::vector<pki::Certificate> bundle = Certificates(DataOf(stored, "ca.crt"));
  ASSERT_EQ(bundle.size(), 2u);
  EXPECT_TRUE(bundle[1] == old_ca.certificate);
  EXPECT_EQ(stored["data"]["tls.crt"], before["data"]["tls.crt"]);
  EXPECT_EQ(stored["data"]["tls.key"], before["data"]["tls.key"]);
  EXPECT_NE(stored["data"]["ca.key"], before["data"]["ca.key"]);
  EXPECT_EQ(AnnotationOf(stored, kRotationPhaseAnnotation), "trusting");
  EXPECT_EQ(AnnotationOf(stored, kRotationStartedAnnotation), FormatRfc3339(clock.Now()));
  ExpectLeafTrustedBy(stored, old_ca.certificate.ToPem(), clock.Now());  // the targets' bundle
  ExpectLeafTrustedBy(stored, DataOf(stored, "ca.crt"), clock.Now());

  // Until the caller has put that bundle into every target, nothing else happens.
  client.ClearRequests();
  auto waiting = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(waiting.has_value());
  EXPECT_EQ(waiting->action, SecretAction::kNone);
  EXPECT_EQ(waiting->rotation.phase, RotationPhase::kTrusting);
  EXPECT_EQ(waiting->ca_bundle, DataOf(stored, "ca.crt"));
  EXPECT_EQ(client.WriteCount(), 0);

  // Step 2: the leaf moves to the new CA; the old one stays trusted for the overlap.
  clock.Advance(std::chrono::seconds(5));
  auto moved = MoveLeafToNewCa(client, Spec(), started->ca_bundle, clock);
  ASSERT_TRUE(moved.has_value()) << moved.error().message();
  EXPECT_EQ(moved->action, SecretAction::kLeafMovedToNewCa);
  stored = Stored(client);
  EXPECT_EQ(DataOf(stored, "ca.crt"), started->ca_bundle);
  EXPECT_EQ(AnnotationOf(stored, kRotationPhaseAnnotation), "overlapping");
  EXPECT_EQ(AnnotationOf(stored, kPreviousCaUntilAnnotation), FormatRfc3339(clock.Now() + kDay));
  ExpectLeafTrustedBy(stored, bundle[0].ToPem(), clock.Now());
  ExpectLeafTrustedBy(stored, started->ca_bundle, clock.Now());
  const pki::ValidationReport full = ValidateStored(stored, kSans, clock.Now());
  EXPECT_TRUE(full.ok()) << Findings(full);

  client.ClearRequests();
  auto overlapping = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(overlapping.has_value());
  EXPECT_EQ(overlapping->action, SecretAction::kNone);
  EXPECT_EQ(overlapping->rotation.previous_ca_until, clock.Now() + kDay);
  EXPECT_EQ(client.WriteCount(), 0);

  // Step 3 after the overlap: the old CA leaves the bundle, the annotations go.
  clock.Advance(kDay);
  auto retired = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(retired.has_value());
  EXPECT_EQ(retired->action, SecretAction::kPreviousCaRetired);
  EXPECT_EQ(retired->rotation.phase, RotationPhase::kNone);
  stored = Stored(client);
  EXPECT_EQ(DataOf(stored, "ca.crt"), bundle[0].ToPem());
  EXPECT_FALSE(stored["metadata"].contains("annotations"));
  ExpectLeafTrustedBy(stored, DataOf(stored, "ca.crt"), clock.Now());

  client.ClearRequests();
  auto steady = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(steady.has_value());
  EXPECT_EQ(steady->action, SecretAction::kNone);
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(EnsureSecret, ARotationWhoseOldLeafStoppedServingMovesTheLeafAtOnce) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair old_ca = MustCa("svc-ca", clock.Now(), 20 * kDay);
  client.Put(kSecrets, ManagedSecret(old_ca, MustLeaf(old_ca, kSans, clock.Now())));
  auto started = MustEnsure(client, Spec(), clock);  // step 1; the targets never followed
  ASSERT_TRUE(started.has_value());
  ASSERT_EQ(started->action, SecretAction::kCaRotationStarted);

  clock.Advance(21 * kDay);  // the old CA and its leaf have expired meanwhile
  auto moved = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->action, SecretAction::kLeafMovedToNewCa);
  EXPECT_EQ(moved->rotation.phase, RotationPhase::kOverlapping);
  ExpectLeafTrustedBy(Stored(client), Certificates(started->ca_bundle)[0].ToPem(), clock.Now());
  // The old CA has expired, so step 3 is due at once.
  auto retired = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(retired.has_value());
  EXPECT_EQ(retired->action, SecretAction::kPreviousCaRetired);
  EXPECT_EQ(Certificates(retired->ca_bundle).size(), 1u);
}

TEST(EnsureSecret, TheOverlapEndsWhenThePreviousCaExpiresIfThatIsSooner) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair old_ca = MustCa("svc-ca", clock.Now(), 20 * kDay);
  client.Put(kSecrets, ManagedSecret(old_ca, MustLeaf(old_ca, kSans, clock.Now())));
  SecretSpec spec = Spec();
  spec.ca_overlap = 60 * kDay;
  auto started = MustEnsure(client, spec, clock);
  ASSERT_TRUE(started.has_value());
  auto moved = MoveLeafToNewCa(client, spec, started->ca_bundle, clock);
  ASSERT_TRUE(moved.has_value()) << moved.error().message();
  EXPECT_EQ(moved->rotation.previous_ca_until, old_ca.certificate.Info().not_after);

  clock.Advance(20 * kDay);
  auto retired = MustEnsure(client, spec, clock);
  ASSERT_TRUE(retired.has_value());
  EXPECT_EQ(retired->action, SecretAction::kPreviousCaRetired);
  EXPECT_EQ(Certificates(retired->ca_bundle).size(), 1u);
}

TEST(EnsureSecret, MovingTheLeafWritesNothingWhenTheRotationIsNotTheOneTheCallerSaw) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair old_ca = MustCa("svc-ca", clock.Now(), 20 * kDay);
  const Json before =
      client.Put(kSecrets, ManagedSecret(old_ca, MustLeaf(old_ca, kSans, clock.Now())));
  client.ClearRequests();
  // No rotation in progress at all.
  auto idle = MoveLeafToNewCa(client, Spec(), DataOf(before, "ca.crt"), clock);
  ASSERT_TRUE(idle.has_value()) << idle.error().message();
  EXPECT_EQ(idle->action, SecretAction::kNone);
  // A rotation, but with another bundle than the one the targets were given.
  auto started = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(started.has_value());
  client.ClearRequests();
  auto other = MoveLeafToNewCa(client, Spec(), DataOf(before, "ca.crt"), clock);
  ASSERT_TRUE(other.has_value()) << other.error().message();
  EXPECT_EQ(other->action, SecretAction::kNone);
  EXPECT_EQ(other->rotation.phase, RotationPhase::kTrusting);
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(EnsureSecret, ManagedSecretWithoutCaKeyRotatesToANewCa) {
  Created cluster;
  Json keyless = cluster.before;
  keyless["data"].erase("ca.key");
  cluster.client.Put(kSecrets, keyless);
  const std::vector<pki::Certificate> old_cas = Certificates(DataOf(cluster.before, "ca.crt"));

  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kCaRotationStarted);
  EXPECT_THAT(outcome->reason, HasSubstr("ca.key"));
  const Json after = Stored(cluster.client);
  EXPECT_THAT(DataKeys(after), UnorderedElementsAre("ca.crt", "ca.key", "tls.crt", "tls.key"));
  // The leaf the old CA issued still serves, so it stays until the targets trust the new CA.
  const std::vector<pki::Certificate> bundle = Certificates(DataOf(after, "ca.crt"));
  ASSERT_EQ(bundle.size(), 2u);
  EXPECT_TRUE(bundle[1] == old_cas[0]);
  EXPECT_EQ(after["data"]["tls.crt"], cluster.before["data"]["tls.crt"]);

  auto moved = MoveLeafToNewCa(cluster.client, Spec(), outcome->ca_bundle, cluster.clock);
  ASSERT_TRUE(moved.has_value()) << moved.error().message();
  EXPECT_EQ(moved->action, SecretAction::kLeafMovedToNewCa);
  const pki::ValidationReport report =
      ValidateStored(Stored(cluster.client), kSans, cluster.clock.Now(), bundle[0].ToPem());
  EXPECT_TRUE(report.ok()) << Findings(report);
}

// What `certctl rotate` leaves on the Secret.
void Request(FakeClient& client, const std::string& what) {
  Json secret = Stored(client);
  secret["metadata"]["annotations"][kRotateAnnotation] = what;
  client.Put(kSecrets, secret);
}

TEST(EnsureSecret, RequestsFromCertctlRotateAreCarriedOutAndCleared) {
  Created cluster;
  Request(cluster.client, "leaf");
  auto leaf = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(leaf.has_value());
  EXPECT_EQ(leaf->action, SecretAction::kLeafReissued);
  EXPECT_EQ(leaf->reason, "certctl rotate");
  Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"]["ca.crt"], cluster.before["data"]["ca.crt"]);
  EXPECT_NE(after["data"]["tls.crt"], cluster.before["data"]["tls.crt"]);
  EXPECT_FALSE(after["metadata"].contains("annotations"));

  Request(cluster.client, "ca");
  auto ca = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(ca.has_value());
  EXPECT_EQ(ca->action, SecretAction::kCaRotationStarted);
  EXPECT_EQ(ca->reason, "certctl rotate --ca");
  after = Stored(cluster.client);
  EXPECT_EQ(AnnotationOf(after, kRotateAnnotation), "");
  EXPECT_EQ(AnnotationOf(after, kRotationPhaseAnnotation), "trusting");
}

TEST(EnsureSecret, ARotationAskedForDuringAnOverlapRetiresThePreviousCaFirst) {
  Created cluster;
  const pki::Certificate first = Certificates(DataOf(cluster.before, "ca.crt"))[0];
  Request(cluster.client, "ca");
  auto started = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(started.has_value());
  auto moved = MoveLeafToNewCa(cluster.client, Spec(), started->ca_bundle, cluster.clock);
  ASSERT_TRUE(moved.has_value()) << moved.error().message();
  const pki::Certificate second = Certificates(moved->ca_bundle)[0];

  Request(cluster.client, "ca");
  auto again = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->action, SecretAction::kCaRotationStarted);
  const std::vector<pki::Certificate> bundle = Certificates(again->ca_bundle);
  ASSERT_EQ(bundle.size(), 2u);  // never three
  EXPECT_FALSE(bundle[0] == second);
  EXPECT_FALSE(bundle[0] == first);
  EXPECT_TRUE(bundle[1] == second);
  ExpectLeafTrustedBy(Stored(cluster.client), second.ToPem(), cluster.clock.Now());
}

// Rotation state is judged against what the Secret holds before anything acts on it: what
// does not match is ignored (or clamped) and written back corrected, and the CA the stored
// leaf chains to is never replaced on its strength.
TEST(EnsureSecret, AStrayTrustingPhaseOnASecretWithOneCaIsRemovedAndTheCaKept) {
  Created cluster;
  Json stray = cluster.before;
  stray["metadata"]["annotations"][kRotationPhaseAnnotation] = "trusting";  // one CA only
  cluster.client.Put(kSecrets, stray);
  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kRepaired);
  EXPECT_EQ(outcome->rotation.phase, RotationPhase::kNone);
  ASSERT_EQ(outcome->rotation_problems.size(), 1u);
  EXPECT_EQ(outcome->rotation_problems[0].annotation, kRotationPhaseAnnotation);
  EXPECT_THAT(outcome->reason, HasSubstr(kRotationPhaseAnnotation));
  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"], cluster.before["data"]);  // CA, key and leaf as they were
  EXPECT_FALSE(after["metadata"].contains("annotations"));

  cluster.client.ClearRequests();
  auto quiet = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(quiet.has_value());
  EXPECT_EQ(quiet->action, SecretAction::kNone);
  EXPECT_TRUE(quiet->rotation_problems.empty());
  EXPECT_EQ(cluster.client.WriteCount(), 0);
}

TEST(EnsureSecret, AnUnknownRotationPhaseIsIgnoredAndRemovedNamingTheAnnotation) {
  Created cluster;
  Json odd = cluster.before;
  odd["metadata"]["annotations"][kRotationPhaseAnnotation] = "stage-7";
  odd["metadata"]["annotations"]["team"] = "payments";
  cluster.client.Put(kSecrets, odd);
  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kRepaired);
  ASSERT_EQ(outcome->rotation_problems.size(), 1u);
  EXPECT_THAT(outcome->rotation_problems[0].message,
              AllOf(HasSubstr(kRotationPhaseAnnotation), HasSubstr("stage-7")));
  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"], cluster.before["data"]);
  EXPECT_EQ(after["metadata"]["annotations"], Json({{"team", "payments"}}));
}

TEST(EnsureSecret, AServerCertificateInCaCrtIsPrunedAndTheCaKept) {
  for (const bool prepended : {false, true}) {
    SCOPED_TRACE(prepended ? "prepended" : "appended");
    Created cluster;
    const std::string ca_crt = DataOf(cluster.before, "ca.crt");
    const std::string leaf = DataOf(cluster.before, "tls.crt");
    Json stray = cluster.before;
    stray["data"]["ca.crt"] = Base64Encode(prepended ? leaf + ca_crt : ca_crt + leaf);
    cluster.client.Put(kSecrets, stray);
    auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->action, SecretAction::kRepaired);
    EXPECT_THAT(outcome->reason, HasSubstr("not CAs"));
    EXPECT_EQ(outcome->ca_bundle, ca_crt);
    const Json after = Stored(cluster.client);
    EXPECT_EQ(after["data"], cluster.before["data"]);

    cluster.client.ClearRequests();
    auto quiet = MustEnsure(cluster.client, Spec(), cluster.clock);
    ASSERT_TRUE(quiet.has_value());
    EXPECT_EQ(quiet->action, SecretAction::kNone);
    EXPECT_EQ(cluster.client.WriteCount(), 0);
  }
}

TEST(EnsureSecret, APreviousCaUntilBeyondTheOverlapIsClampedToTheLeafsMovePlusTheOverlap) {
  Created cluster;
  Request(cluster.client, "ca");
  auto started = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(started.has_value());
  cluster.clock.Advance(std::chrono::minutes(3));  // step 2 some time after step 1
  auto moved = MoveLeafToNewCa(cluster.client, Spec(), started->ca_bundle, cluster.clock);
  ASSERT_TRUE(moved.has_value()) << moved.error().message();
  const std::string until = FormatRfc3339(cluster.clock.Now() + kDay);
  ASSERT_EQ(AnnotationOf(Stored(cluster.client), kPreviousCaUntilAnnotation), until);
  // What certctl wrote is within the bound: nothing to say.
  auto quiet = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(quiet.has_value());
  EXPECT_EQ(quiet->action, SecretAction::kNone);
  EXPECT_TRUE(quiet->rotation_problems.empty());

  Json forever = Stored(cluster.client);
  forever["metadata"]["annotations"][kPreviousCaUntilAnnotation] = "9999-12-31T23:59:59Z";
  cluster.client.Put(kSecrets, forever);
  auto clamped = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(clamped.has_value());
  EXPECT_EQ(clamped->action, SecretAction::kRepaired);
  ASSERT_EQ(clamped->rotation_problems.size(), 1u);
  EXPECT_EQ(clamped->rotation_problems[0].annotation, kPreviousCaUntilAnnotation);
  Json after = Stored(cluster.client);
  EXPECT_EQ(AnnotationOf(after, kPreviousCaUntilAnnotation), until);
  EXPECT_EQ(AnnotationOf(after, kRotationPhaseAnnotation), "overlapping");
  EXPECT_EQ(Certificates(DataOf(after, "ca.crt")).size(), 2u);

  // Unreadable, it is set the same way rather than ending the overlap at once.
  Json garbled = after;
  garbled["metadata"]["annotations"][kPreviousCaUntilAnnotation] = "tomorrow";
  cluster.client.Put(kSecrets, garbled);
  auto set = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(set->action, SecretAction::kRepaired);
  EXPECT_EQ(AnnotationOf(Stored(cluster.client), kPreviousCaUntilAnnotation), until);

  cluster.clock.Advance(kDay);
  auto retired = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(retired.has_value());
  EXPECT_EQ(retired->action, SecretAction::kPreviousCaRetired);
}

TEST(EnsureSecret, ATrustingPhaseWhoseKeyDoesNotMatchKeepsTheCaTheLeafChainsTo) {
  Created cluster;
  const pki::Certificate first = Certificates(DataOf(cluster.before, "ca.crt"))[0];
  Request(cluster.client, "ca");
  auto started = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(started.has_value());
  // ca.key no longer belongs to the new CA: not what step 1 stores.
  Json broken = Stored(cluster.client);
  broken["data"]["ca.key"] = Base64Encode(KeyPem(MustCa("other", cluster.clock.Now()).key));
  cluster.client.Put(kSecrets, broken);
  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_NE(outcome->action, SecretAction::kCaReplaced);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"]["tls.crt"], cluster.before["data"]["tls.crt"]);
  const std::vector<pki::Certificate> bundle = Certificates(DataOf(after, "ca.crt"));
  EXPECT_TRUE(std::any_of(bundle.begin(), bundle.end(),
                          [&](const pki::Certificate& ca) { return ca == first; }));
  ExpectLeafTrustedBy(after, first.ToPem(), cluster.clock.Now());
  ExpectLeafTrustedBy(after, DataOf(after, "ca.crt"), cluster.clock.Now());
}

TEST(EnsureSecret, ABundleLeftWithAnOldCaByAnEarlierVersionIsTrimmed) {
  Created cluster;
  // What a CA replacement used to store: the new CA, then the old one, no annotations.
  const pki::KeyPair old_ca = MustCa("svc-ca", cluster.clock.Now());
  Json legacy = cluster.before;
  legacy["data"]["ca.crt"] =
      Base64Encode(DataOf(cluster.before, "ca.crt") + old_ca.certificate.ToPem());
  cluster.client.Put(kSecrets, legacy);
  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kPreviousCaRetired);
  EXPECT_EQ(DataOf(Stored(cluster.client), "ca.crt"), DataOf(cluster.before, "ca.crt"));
}

TEST(EnsureSecret, GarbageLeafInAManagedSecretIsRepaired) {
  Created cluster;
  Json broken = cluster.before;
  broken["data"]["tls.crt"] = Base64Encode("-----BEGIN CERTIFICATE-----\ngarbage\n");
  cluster.client.Put(kSecrets, broken);

  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"]["ca.crt"], cluster.before["data"]["ca.crt"]);
  EXPECT_EQ(after["data"]["ca.key"], cluster.before["data"]["ca.key"]);
  const pki::ValidationReport report = ValidateStored(after, kSans, cluster.clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
}

TEST(EnsureSecret, TheDataItStoresIsReturnedForTheCallersMemory) {
  FakeClock clock;
  FakeClient client;
  auto created = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(created.has_value());
  EXPECT_EQ(created->stored_data, Stored(client)["data"].get<StringMap>());
  auto steady = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(steady.has_value());
  EXPECT_TRUE(steady->stored_data.empty());  // nothing written
}

TEST(EnsureSecret, ARepairTheCallerHoldsBackWritesNothingAndSaysWhatWaits) {
  Created cluster;
  Json broken = cluster.before;
  broken["data"]["tls.crt"] = Base64Encode("garbage");
  cluster.client.Put(kSecrets, broken);
  std::vector<Json> asked;
  const SecretHoldBack hold = [&](const Json& secret) {
    asked.push_back(secret);
    return true;
  };

  auto outcome = EnsureSecret(cluster.client, Spec(), cluster.clock, {}, hold);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_TRUE(outcome->held_back);
  EXPECT_EQ(outcome->action, SecretAction::kNone);
  EXPECT_THAT(outcome->reason, HasSubstr("server certificate"));
  EXPECT_TRUE(outcome->stored_data.empty());
  EXPECT_EQ(cluster.client.WriteCount(), 0);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0]["data"]["tls.crt"], Base64Encode("garbage"));  // the Secret as read

  // Released, the same repair goes.
  auto repaired =
      EnsureSecret(cluster.client, Spec(), cluster.clock, {}, [](const Json&) { return false; });
  ASSERT_TRUE(repaired.has_value());
  EXPECT_EQ(repaired->action, SecretAction::kLeafReissued);
  EXPECT_FALSE(repaired->held_back);
  EXPECT_EQ(repaired->stored_data.at("tls.crt"), Stored(cluster.client)["data"]["tls.crt"]);
}

TEST(EnsureSecret, NeitherACreationNorASteadySecretAsksTheHold) {
  FakeClock clock;
  FakeClient client;
  int asked = 0;
  const SecretHoldBack hold = [&](const Json&) {
    ++asked;
    return true;
  };
  auto created = EnsureSecret(client, Spec(), clock, {}, hold);
  ASSERT_TRUE(created.has_value());
  EXPECT_EQ(created->action, SecretAction::kCreated);
  auto steady = EnsureSecret(client, Spec(), clock, {}, hold);
  ASSERT_TRUE(steady.has_value());
  EXPECT_EQ(steady->action, SecretAction::kNone);
  EXPECT_FALSE(steady->held_back);
  EXPECT_EQ(asked, 0);
}

TEST(EnsureSecret, GarbageCaInAManagedSecretGetsANewCa) {
  Created cluster;
  Json broken = cluster.before;
  broken["data"]["ca.crt"] = Base64Encode("not a certificate");
  cluster.client.Put(kSecrets, broken);

  auto outcome = MustEnsure(cluster.client, Spec(), cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kCaReplaced);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(Certificates(DataOf(after, "ca.crt")).size(), 1u);
  const pki::ValidationReport report = ValidateStored(after, kSans, cluster.clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
}

TargetSelection HookSelection() {
  TargetSelection selection;
  selection.validating_webhooks = {"hook"};
  return selection;
}

// A cluster whose Secret certctl created and whose webhook configuration "hook" holds the
// Secret's CA bundle, as injected.
struct Injected : Created {
  Injected() {
    client.Put(kube::kValidatingWebhookConfigurations,
               certctl::testing::WebhookConfiguration(
                   "hook", {certctl::testing::WebhookEntry("a.example.com", kNs)
                                .Service(kNs, "svc")
                                .Bundle(DataOf(before, "ca.crt"))}));
    client.ClearRequests();
  }

  // What EnsureSecret's caller passes: the targets' bundles, counted when read.
  KnownBundles Known() {
    return [this] {
      ++known_reads;
      return BundlesOfTargets(client, HookSelection());
    };
  }

  // Replaces data.`key` with `pem`, then runs EnsureSecret with the targets' bundles.
  Result<SecretOutcome> EnsureAfterWriting(const std::string& key, const std::string& pem) {
    Json broken = before;
    broken["data"][key] = Base64Encode(pem);
    client.Put(kSecrets, broken);
    client.ClearRequests();
    auto outcome = EnsureSecret(client, Spec(), clock, Known());
    EXPECT_TRUE(outcome.has_value()) << outcome.error().message();
    return outcome;
  }

  int known_reads = 0;
};

TEST(EnsureSecret, ASteadySecretNeverReadsTheTargetsBundles) {
  Injected cluster;
  auto outcome = EnsureSecret(cluster.client, Spec(), cluster.clock, cluster.Known());
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->action, SecretAction::kNone);
  EXPECT_EQ(cluster.known_reads, 0);
}

TEST(EnsureSecret, ADamagedCaCrtIsRebuiltFromATargetsBundleWithoutANewCa) {
  const pki::KeyPair foreign_ca = MustCa(Spec().ca.common_name, FakeClock().Now());
  Created reference;
  const std::string leaf = DataOf(reference.before, "tls.crt");
  const std::vector<std::pair<std::string, std::string>> damage = {
      {"garbage", "not a certificate"},
      {"empty", ""},
      {"the server certificate twice", leaf + leaf},
      {"a foreign CA of the same name", foreign_ca.certificate.ToPem()},
  };
  for (const auto& [what, pem] : damage) {
    SCOPED_TRACE(what);
    Injected cluster;
    auto outcome = cluster.EnsureAfterWriting("ca.crt", pem);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->action, SecretAction::kRepaired);
    EXPECT_THAT(outcome->reason,
                HasSubstr("rebuilt from validatingwebhookconfiguration/hook's caBundle, the CA "
                          "kept"));
    // Everything as before: the same CA, key and leaf, and the targets' bundle unchanged.
    EXPECT_EQ(Stored(cluster.client)["data"], cluster.before["data"]);
    EXPECT_EQ(outcome->ca_bundle, DataOf(cluster.before, "ca.crt"));
    EXPECT_EQ(cluster.known_reads, 1);

    cluster.client.ClearRequests();
    auto quiet = EnsureSecret(cluster.client, Spec(), cluster.clock, cluster.Known());
    ASSERT_TRUE(quiet.has_value());
    EXPECT_EQ(quiet->action, SecretAction::kNone);
    EXPECT_EQ(cluster.client.WriteCount(), 0);
  }
}

TEST(EnsureSecret, TheCaBesideADamagedBlockInCaCrtIsKeptWithoutReadingTheTargets) {
  Injected cluster;
  const std::string ca_crt = DataOf(cluster.before, "ca.crt");
  auto outcome = cluster.EnsureAfterWriting(
      "ca.crt", "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n" + ca_crt);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kRepaired);
  EXPECT_THAT(outcome->reason, HasSubstr("rebuilt from ca.crt, the CA kept"));
  EXPECT_EQ(Stored(cluster.client)["data"], cluster.before["data"]);
  EXPECT_EQ(cluster.known_reads, 0);
}

TEST(EnsureSecret, ADamagedCaCrtAndLeafKeepTheCaAndReissueOnlyTheLeaf) {
  Injected cluster;
  Json broken = cluster.before;
  broken["data"]["tls.crt"] = Base64Encode("garbage");
  cluster.before = broken;
  auto outcome = cluster.EnsureAfterWriting("ca.crt", "garbage");
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"]["ca.key"], broken["data"]["ca.key"]);
  EXPECT_EQ(DataOf(after, "ca.crt"), outcome->ca_bundle);
  auto targets = ResolveTargets(cluster.client, HookSelection());
  ASSERT_TRUE(targets.has_value());
  auto slots = inject::ReadBundleSlots(inject::TargetKind::kValidatingWebhookConfiguration,
                                       targets->found.at(0).object);
  ASSERT_TRUE(slots.has_value());
  EXPECT_EQ(slots->at(0).bundle, outcome->ca_bundle);  // what the targets trust, unchanged
  const pki::ValidationReport report = ValidateStored(after, kSans, cluster.clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
}

TEST(EnsureSecret, ACaKeyThatMatchesNoKnownCertificateStillGetsANewCa) {
  Injected cluster;
  // The target holds another CA: nothing anywhere is ca.key's certificate.
  const pki::KeyPair other = MustCa("other", cluster.clock.Now());
  cluster.client.Put(kube::kValidatingWebhookConfigurations,
                     certctl::testing::WebhookConfiguration(
                         "hook", {certctl::testing::WebhookEntry("a.example.com", kNs)
                                      .Service(kNs, "svc")
                                      .Bundle(other.certificate.ToPem())}));
  auto outcome = cluster.EnsureAfterWriting("ca.crt", "garbage");
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kCaReplaced);
  EXPECT_NE(Stored(cluster.client)["data"]["ca.key"], cluster.before["data"]["ca.key"]);
}

TEST(EnsureSecret, ValidExternalSecretIsLeftAloneAndItsBundleReturned) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair ca = MustCa("corp-ca", clock.Now());
  const Json before = client.Put(kSecrets, ExternalSecret(ca, MustLeaf(ca, kSans, clock.Now())));

  auto outcome = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kNone);
  EXPECT_FALSE(outcome->managed);
  EXPECT_EQ(outcome->ca_bundle, ca.certificate.ToPem());
  EXPECT_EQ(outcome->tls_crt, DataOf(before, "tls.crt"));
  EXPECT_EQ(outcome->tls_key, DataOf(before, "tls.key"));
  EXPECT_TRUE(outcome->validation.ok());
  EXPECT_EQ(Stored(client), before);
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(EnsureSecret, InvalidExternalSecretIsReportedAndLeftAsItIs) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair ca = MustCa("corp-ca", clock.Now());
  const Json before =
      client.Put(kSecrets, ExternalSecret(ca, MustLeaf(ca, {"old.webhooks.svc"}, clock.Now())));

  auto outcome = EnsureSecret(client, Spec(), clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(outcome.error().message(),
              AllOf(StartsWith(kObject), HasSubstr("not managed by certctl"),
                    HasSubstr("[tls.crt]"), HasSubstr("svc.webhooks.svc")));
  EXPECT_EQ(Stored(client), before);
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(EnsureSecret, AdoptLabelsAValidExternalSecretWithoutChangingItsData) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair ca = MustCa("corp-ca", clock.Now());
  const Json before = client.Put(kSecrets, ExternalSecret(ca, MustLeaf(ca, kSans, clock.Now())));
  SecretSpec spec = Spec();
  spec.adopt = true;

  auto outcome = MustEnsure(client, spec, clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kAdopted);
  EXPECT_TRUE(outcome->managed);
  EXPECT_EQ(outcome->ca_bundle, ca.certificate.ToPem());
  const Json after = Stored(client);
  EXPECT_EQ(after["data"], before["data"]);
  EXPECT_EQ(after["type"], before["type"]);
  EXPECT_EQ(after["metadata"]["labels"],
            Json({{kManagedByLabel, kManagedByValue}, {"team", "platform"}}));
  EXPECT_EQ(client.WriteCount(), 1);
}

TEST(EnsureSecret, AdoptRepairsAnInvalidExternalSecret) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair ca = MustCa("corp-ca", clock.Now());
  client.Put(kSecrets, ExternalSecret(ca, MustLeaf(ca, {"old.webhooks.svc"}, clock.Now())));
  SecretSpec spec = Spec();
  spec.adopt = true;

  auto outcome = MustEnsure(client, spec, clock);
  ASSERT_TRUE(outcome.has_value());
  // Without its ca.key the leaf cannot be re-issued under the old CA.
  EXPECT_EQ(outcome->action, SecretAction::kCaReplaced);
  const Json after = Stored(client);
  EXPECT_EQ(after["metadata"]["labels"][kManagedByLabel], kManagedByValue);
  const pki::ValidationReport report = ValidateStored(after, kSans, clock.Now());
  EXPECT_TRUE(report.ok()) << Findings(report);
}

TEST(EnsureSecret, SecretOfAnotherTypeIsRefusedNamingTheType) {
  Created cluster;
  Json opaque = cluster.before;
  opaque["type"] = "Opaque";
  const Json before = cluster.client.Put(kSecrets, opaque);

  auto outcome = EnsureSecret(cluster.client, Spec(), cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(outcome.error().message(),
              AllOf(HasSubstr(kObject), HasSubstr("\"Opaque\""), HasSubstr("kubernetes.io/tls")));
  EXPECT_EQ(Stored(cluster.client), before);
  EXPECT_EQ(cluster.client.WriteCount(), 0);
}

TEST(EnsureSecret, ExternalSecretWithoutTlsKeyIsAnError) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair ca = MustCa("corp-ca", clock.Now());
  Json secret = ExternalSecret(ca, MustLeaf(ca, kSans, clock.Now()));
  secret["data"].erase("tls.key");
  const Json before = client.Put(kSecrets, secret);

  auto outcome = EnsureSecret(client, Spec(), clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(outcome.error().message(), AllOf(HasSubstr(kObject), HasSubstr("tls.key")));
  EXPECT_EQ(Stored(client), before);
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(EnsureSecret, SecretCreatedConcurrentlyIsKeptNotOverwritten) {
  FakeClock clock;
  FakeClient fake;
  const pki::KeyPair ca = MustCa("svc-ca", clock.Now());
  const Json theirs = ManagedSecret(ca, MustLeaf(ca, kSans, clock.Now()));
  // Another replica creates the Secret between our Get and our Create.
  InterposingClient client(fake, Verb::kCreate,
                           [&theirs](FakeClient& other) { other.Put(kSecrets, theirs); });

  auto outcome = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(client.acted());
  EXPECT_EQ(outcome->action, SecretAction::kNone);
  EXPECT_EQ(outcome->ca_bundle, ca.certificate.ToPem());
  EXPECT_EQ(Stored(fake)["data"], theirs["data"]);
  EXPECT_EQ(fake.CountOf(Verb::kUpdate, kSecrets), 0);
}

TEST(EnsureSecret, InjectedAlreadyExistsRereadsAndRepairsTheOtherWritersSecret) {
  FakeClock clock;
  FakeClient fake;
  // The other writer made its Secret for the old service name: it is validated and its CA
  // kept (the leaf is re-issued by update), never replaced by a create of ours.
  const pki::KeyPair ca = MustCa("svc-ca", clock.Now());
  const Json theirs = ManagedSecret(ca, MustLeaf(ca, {"old.webhooks.svc"}, clock.Now()));
  fake.InjectFailure(Verb::kCreate, kSecrets,
                     Error(ErrorCode::kAlreadyExists, "secrets \"webhook-server-cert\" exists"));
  InterposingClient client(fake, Verb::kCreate,
                           [&theirs](FakeClient& other) { other.Put(kSecrets, theirs); });

  auto outcome = MustEnsure(client, Spec(), clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  const Json after = Stored(fake);
  EXPECT_EQ(after["data"]["ca.crt"], theirs["data"]["ca.crt"]);
  EXPECT_EQ(after["data"]["ca.key"], theirs["data"]["ca.key"]);
  EXPECT_TRUE(ValidateStored(after, kSans, clock.Now()).ok());
  EXPECT_EQ(fake.CountOf(Verb::kCreate, kSecrets), 1);
}

TEST(EnsureSecret, ConflictOnUpdateIsRetriedFromAFreshRead) {
  Created cluster;
  SecretSpec spec = Spec();
  spec.identity.service = "svc2";
  cluster.client.InjectFailure(
      Verb::kUpdate, kSecrets,
      Error(ErrorCode::kConflict, "Operation cannot be fulfilled on secrets"));

  auto outcome = MustEnsure(cluster.client, spec, cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kSecrets, kName), 2);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["data"]["ca.crt"], cluster.before["data"]["ca.crt"]);
  EXPECT_TRUE(ValidateStored(after, {"svc2.webhooks.svc"}, cluster.clock.Now()).ok());
}

TEST(EnsureSecret, ConcurrentChangeIsKeptWhenTheUpdateConflicts) {
  Created cluster;
  SecretSpec spec = Spec();
  spec.identity.service = "svc2";
  // Someone annotates the Secret after our read: our update carries a stale resourceVersion.
  InterposingClient client(cluster.client, Verb::kUpdate, [](FakeClient& other) {
    Json secret = Stored(other);
    secret["metadata"]["annotations"] = {{"reloader", "yes"}};
    other.Put(kSecrets, secret);
  });

  auto outcome = MustEnsure(client, spec, cluster.clock);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(after["metadata"]["annotations"], Json({{"reloader", "yes"}}));
  EXPECT_TRUE(ValidateStored(after, {"svc2.webhooks.svc"}, cluster.clock.Now()).ok());
}

TEST(EnsureSecret, ConflictsForeverGiveUpAfterBoundedAttempts) {
  Created cluster;
  SecretSpec spec = Spec();
  spec.identity.service = "svc2";
  cluster.client.InjectFailure(
      Verb::kUpdate, kSecrets,
      Error(ErrorCode::kConflict, "Operation cannot be fulfilled on secrets"), 1000);

  auto outcome = EnsureSecret(cluster.client, spec, cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kConflict);
  EXPECT_THAT(outcome.error().message(), HasSubstr(kObject));
  const int updates = cluster.client.CountOf(Verb::kUpdate, kSecrets);
  EXPECT_GT(updates, 1);
  EXPECT_LE(updates, 10);
  EXPECT_EQ(Stored(cluster.client), cluster.before);
}

TEST(EnsureSecret, ForbiddenGetIsAnErrorWithContextAndNothingIsWritten) {
  FakeClock clock;
  FakeClient client;
  client.InjectFailure(
      Verb::kGet, kSecrets,
      Error(ErrorCode::kPermissionDenied,
            "secrets \"webhook-server-cert\" is forbidden: User \"x\" cannot get resource"));
  auto outcome = EnsureSecret(client, Spec(), clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_THAT(
      outcome.error().message(),
      AllOf(StartsWith("get secret/webhooks/webhook-server-cert: "), HasSubstr("forbidden")));
  EXPECT_EQ(client.WriteCount(), 0);
  EXPECT_FALSE(client.Object(kSecrets, kNs, kName).has_value());
}

TEST(EnsureSecret, ForbiddenUpdateIsAnErrorAndTheSecretStays) {
  Created cluster;
  SecretSpec spec = Spec();
  spec.identity.service = "svc2";
  cluster.client.InjectFailure(Verb::kUpdate, kSecrets,
                               Error(ErrorCode::kPermissionDenied, "secrets is forbidden"));
  auto outcome = EnsureSecret(cluster.client, spec, cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_THAT(outcome.error().message(), StartsWith(std::string("update ") + kObject + ": "));
  EXPECT_EQ(cluster.client.CountOf(Verb::kUpdate, kSecrets), 1);
  EXPECT_EQ(Stored(cluster.client), cluster.before);
}

TEST(EnsureSecret, LeafNeverOutlivesTheCa) {
  SecretSpec spec = Spec();
  spec.ca.validity = 200 * kDay;
  spec.leaf_validity = std::chrono::hours(24 * 365 * 10);
  FakeClock clock;
  FakeClient client;
  auto created = MustEnsure(client, spec, clock);
  ASSERT_TRUE(created.has_value());
  const TimePoint ca_end = Certificates(created->ca_bundle)[0].Info().not_after;
  EXPECT_EQ(Leaf(Stored(client)).Info().not_after, ca_end);

  // A re-issue late in the CA's life is clamped as well.
  clock.Advance(100 * kDay);
  spec.identity.service = "svc2";
  auto reissued = MustEnsure(client, spec, clock);
  ASSERT_TRUE(reissued.has_value());
  EXPECT_EQ(reissued->action, SecretAction::kLeafReissued);
  EXPECT_LE(Leaf(Stored(client)).Info().not_after, ca_end);
}

TEST(EnsureSecret, APairThatFailsItsOwnValidationIsNeverWritten) {
  // A leaf that would already be due for renewal the moment it is made: writing it would make
  // every later run replace it again.
  SecretSpec spec = Spec();
  spec.leaf_validity = 10 * kDay;  // renew_before is 30 days
  FakeClock clock;
  FakeClient empty;
  auto created = EnsureSecret(empty, spec, clock);
  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().code(), ErrorCode::kInternal);
  EXPECT_THAT(created.error().message(),
              AllOf(HasSubstr("the pair issued for " + std::string(kObject) +
                              " does not pass its own validation"),
                    HasSubstr("nothing was written")));
  EXPECT_EQ(empty.WriteCount(), 0);

  Created cluster;
  cluster.clock.Advance(61 * kDay);  // the stored leaf is due; its replacement would be too
  auto reissued = EnsureSecret(cluster.client, spec, cluster.clock);
  ASSERT_FALSE(reissued.has_value());
  EXPECT_EQ(reissued.error().code(), ErrorCode::kInternal);
  EXPECT_EQ(cluster.client.WriteCount(), 0);
  EXPECT_EQ(Stored(cluster.client), cluster.before);
}

TEST(EnsureSecret, ActionNamesAreStable) {
  EXPECT_EQ(SecretActionName(SecretAction::kNone), "none");
  EXPECT_EQ(SecretActionName(SecretAction::kCreated), "created");
  EXPECT_EQ(SecretActionName(SecretAction::kLeafReissued), "leaf-reissued");
  EXPECT_EQ(SecretActionName(SecretAction::kCaReplaced), "ca-replaced");
  EXPECT_EQ(SecretActionName(SecretAction::kAdopted), "adopted");
}

TEST(EnsureSecret, PolicyCoversTheContractSans) {
  SecretSpec spec = Spec();
  spec.identity.extra_dns_names = {"webhook.example.com"};
  spec.identity.ip_addresses = {"10.0.0.7"};
  const pki::ValidationPolicy policy = PolicyFor(spec);
  std::vector<std::string> sans = kSans;
  sans.push_back("webhook.example.com");
  EXPECT_THAT(policy.dns_names, ElementsAreArray(sans));
  EXPECT_THAT(policy.ip_addresses, ElementsAre("10.0.0.7"));
  EXPECT_EQ(policy.renew_before, spec.renew_before);
}

}  // namespace
}  // namespace ensure_secret_test
}  // namespace certctl::controller
