#include "certctl/controller/name_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/util/duration.h"

namespace certctl::controller {
namespace name_request_test {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kObject[] = "secret/ns/cert";

const TimePoint kNow = ParseRfc3339("2026-11-28T10:00:00Z").value();

Json WithRequest(const std::string& names, const std::string& at) {
  return {
      {"metadata",
       {{"name", "cert"},
        {"annotations", {{kRequestedNamesAnnotation, names}, {kNamesRequestedAtAnnotation, at}}}}}};
}

TEST(NameRequest, NamesAndAddressesAreReadWithoutRepeatsOrBlanks) {
  const auto reading = ReadNameRequest(WithRequest(" a.ns.svc,10.0.0.7,, a.ns.svc ,*.example.com",
                                                   "2026-11-28T09:59:00Z"),
                                       kObject, kNow)
                           .value();
  ASSERT_TRUE(reading.request.has_value());
  EXPECT_THAT(reading.request->names, ElementsAre("a.ns.svc", "10.0.0.7", "*.example.com"));
  EXPECT_EQ(reading.request->at, kNow - 1min);
  EXPECT_TRUE(reading.problems.empty());
}

TEST(NameRequest, AnExpiredRequestIsNoneAndNotAProblem) {
  const auto reading =
      ReadNameRequest(WithRequest("a.ns.svc", FormatRfc3339(kNow - kNameRequestLifetime - 1s)),
                      kObject, kNow)
          .value();
  EXPECT_FALSE(reading.request.has_value());
  EXPECT_TRUE(reading.problems.empty());
}

TEST(NameRequest, WhatCertctlNeverWritesIsIgnoredAndTold) {
  const auto no_time = ReadNameRequest(
      Json{{"metadata", {{"annotations", {{kRequestedNamesAnnotation, "a.ns.svc"}}}}}}, kObject,
      kNow);
  ASSERT_TRUE(no_time);
  EXPECT_FALSE(no_time->request.has_value());
  ASSERT_EQ(no_time->problems.size(), 1u);
  EXPECT_THAT(no_time->problems[0].message, HasSubstr(kNamesRequestedAtAnnotation));

  const auto future =
      ReadNameRequest(WithRequest("a.ns.svc", "2026-11-28T11:00:00Z"), kObject, kNow);
  ASSERT_TRUE(future);
  EXPECT_FALSE(future->request.has_value());
  ASSERT_EQ(future->problems.size(), 1u);
  EXPECT_THAT(future->problems[0].message, HasSubstr("not in the future"));

  const auto not_a_time = ReadNameRequest(WithRequest("a.ns.svc", "yesterday"), kObject, kNow);
  ASSERT_TRUE(not_a_time);
  EXPECT_FALSE(not_a_time->request.has_value());
  EXPECT_THAT(not_a_time->problems[0].message, HasSubstr("RFC 3339"));

  const auto junk =
      ReadNameRequest(WithRequest("under_score.io, ok.io", FormatRfc3339(kNow)), kObject, kNow);
  ASSERT_TRUE(junk && junk->request);
  EXPECT_THAT(junk->request->names, ElementsAre("ok.io"));
  ASSERT_EQ(junk->problems.size(), 1u);
  EXPECT_THAT(junk->problems[0].message, HasSubstr("under_score.io"));

  Json broken = WithRequest("a.ns.svc", FormatRfc3339(kNow));
  broken["metadata"]["annotations"][kRequestedNamesAnnotation] = 7;
  const auto unreadable = ReadNameRequest(broken, kObject, kNow);
  ASSERT_FALSE(unreadable);
  EXPECT_THAT(unreadable.error().message(), HasSubstr(kRequestedNamesAnnotation));
}

TEST(NameRequest, RequestedNamesFollowTheFlagsOwnWithoutRepeats) {
  pki::ServiceIdentity identity;
  identity.service = "hook";
  identity.namespace_name = "ns";
  identity.ip_addresses = {"10.0.0.1"};
  const NameRequest request{.names = {"hook.ns.svc", "new.ns.svc", "10.0.0.1", "10.0.0.2"},
                            .at = kNow};
  const pki::ServiceIdentity wider = WithRequestedNames(identity, request);
  EXPECT_THAT(wider.extra_dns_names, ElementsAre("new.ns.svc"));
  EXPECT_THAT(wider.ip_addresses, ElementsAre("10.0.0.1", "10.0.0.2"));
  EXPECT_EQ(pki::RequiredDnsNames(wider).front(), "hook.ns.svc");
}

TEST(NameRequest, ANameStillCalledStaysWithItsServicesOtherForms) {
  pki::ServiceIdentity identity;
  identity.service = "renamed";
  identity.namespace_name = "ns";
  pki::CertificateInfo stored;
  stored.dns_names = {"hook.ns.svc",     "hook",
                      "hook.ns",         "hook.ns.svc.cluster.local",
                      "api.example.com", "gone.example.com"};
  stored.ip_addresses = {"10.0.0.1"};
  const pki::ServiceIdentity kept = WithNamesStillCalled(
      identity, stored,
      {"hook.ns.svc", "api.example.com", "10.0.0.1", "renamed.ns.svc", "other.ns.svc"});
  EXPECT_THAT(kept.extra_dns_names, ElementsAre("hook.ns.svc", "hook", "hook.ns",
                                                "hook.ns.svc.cluster.local", "api.example.com"));
  EXPECT_THAT(kept.ip_addresses, ElementsAre("10.0.0.1"));
  EXPECT_EQ(pki::RequiredDnsNames(kept).front(), "renamed.ns.svc");
}

TEST(NameRequest, NamesNotCoveredAreJudgedAsTheApiServerMatchesHosts) {
  pki::ServiceIdentity identity;
  identity.service = "hook";
  identity.namespace_name = "ns";
  identity.extra_dns_names = {"api.example.com"};
  identity.ip_addresses = {"10.0.0.1"};
  pki::CertificateInfo leaf;
  leaf.dns_names = {"hook.ns.svc", "hook", "hook.ns", "hook.ns.svc.cluster.local", "*.example.com"};
  EXPECT_THAT(NamesNotCovered(identity, leaf), ElementsAre("10.0.0.1"));
}

}  // namespace
}  // namespace name_request_test
}  // namespace certctl::controller
