#include "certctl/pki/names.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::pki {
namespace names_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

ServiceIdentity Identity() {
  ServiceIdentity identity;
  identity.service = "webhook";
  identity.namespace_name = "system";
  return identity;
}

TEST(PkiNames, RequiredDnsNamesFollowTheContractOrder) {
  ServiceIdentity identity = Identity();
  identity.extra_dns_names = {"webhook.example.com", "*.internal.example.com"};
  EXPECT_THAT(RequiredDnsNames(identity),
              ElementsAre("webhook.system.svc", "webhook", "webhook.system",
                          "webhook.system.svc.cluster.local", "webhook.example.com",
                          "*.internal.example.com"));
}

TEST(PkiNames, ClusterDomainIsConfigurable) {
  ServiceIdentity identity = Identity();
  identity.cluster_domain = "corp.example.";
  EXPECT_THAT(RequiredDnsNames(identity),
              ElementsAre("webhook.system.svc", "webhook", "webhook.system",
                          "webhook.system.svc.corp.example"));
}

TEST(PkiNames, DuplicatesAreDroppedCaseInsensitivelyKeepingTheFirst) {
  ServiceIdentity identity = Identity();
  identity.extra_dns_names = {"WEBHOOK.system.svc", "extra.example.com", "Extra.Example.com",
                              "webhook"};
  EXPECT_THAT(RequiredDnsNames(identity),
              ElementsAre("webhook.system.svc", "webhook", "webhook.system",
                          "webhook.system.svc.cluster.local", "extra.example.com"));
}

TEST(PkiNames, ExtraNamesAloneWithoutService) {
  ServiceIdentity identity;
  identity.extra_dns_names = {"a.example.com", "b.example.com", "a.example.com"};
  EXPECT_THAT(RequiredDnsNames(identity), ElementsAre("a.example.com", "b.example.com"));
  EXPECT_TRUE(ValidateIdentity(identity).has_value());
}

TEST(PkiNames, ValidIdentityPasses) {
  ServiceIdentity identity = Identity();
  identity.extra_dns_names = {"*.example.com", "Webhook.Example.com"};
  identity.ip_addresses = {"10.0.0.1", "fd00::1"};
  const Status status = ValidateIdentity(identity);
  EXPECT_TRUE(status.has_value()) << status.error().message();
}

TEST(PkiNames, TooManyExtraNamesAreRefusedAtOnce) {
  ServiceIdentity identity = Identity();
  for (std::size_t i = 0; i < kMaxExtraNames; ++i) {
    identity.extra_dns_names.push_back("n" + std::to_string(i) + ".example.com");
  }
  EXPECT_TRUE(ValidateIdentity(identity).has_value());
  identity.ip_addresses = {"10.0.0.1"};
  const Status status = ValidateIdentity(identity);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(status.error().message(),
              HasSubstr("--dns-name and --ip: 101 names given, at most 100"));
}

TEST(PkiNames, NothingToNameIsAnError) {
  ServiceIdentity identity;
  identity.ip_addresses = {"10.0.0.1"};
  const Status status = ValidateIdentity(identity);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(status.error().message(), HasSubstr("--service or --dns-name"));
}

struct FieldCase {
  const char* field;
  ServiceIdentity identity;
};

TEST(PkiNames, ErrorsNameTheFieldAtFault) {
  auto with = [](auto change) {
    ServiceIdentity identity = Identity();
    change(identity);
    return identity;
  };
  const FieldCase cases[] = {
      {"--service", with([](ServiceIdentity& i) { i.service = "Web_Hook"; })},
      {"--service", with([](ServiceIdentity& i) { i.service = "-webhook"; })},
      {"--service", with([](ServiceIdentity& i) { i.service = std::string(64, 'a'); })},
      {"--namespace", with([](ServiceIdentity& i) { i.namespace_name = "kube.system"; })},
      {"--namespace", with([](ServiceIdentity& i) { i.namespace_name = ""; })},
      {"--cluster-domain", with([](ServiceIdentity& i) { i.cluster_domain = "bad..domain"; })},
      {"--cluster-domain", with([](ServiceIdentity& i) { i.cluster_domain = "*.local"; })},
      {"--dns-name", with([](ServiceIdentity& i) { i.extra_dns_names = {"under_score.io"}; })},
      {"--dns-name", with([](ServiceIdentity& i) { i.extra_dns_names = {"a.*.example.com"}; })},
      {"--dns-name", with([](ServiceIdentity& i) { i.extra_dns_names = {"*"}; })},
      {"--dns-name", with([](ServiceIdentity& i) { i.extra_dns_names = {"f*o.example.com"}; })},
      {"--dns-name", with([](ServiceIdentity& i) { i.extra_dns_names = {"trailing.dot."}; })},
      {"--dns-name", with([](ServiceIdentity& i) { i.extra_dns_names = {""}; })},
      {"--ip", with([](ServiceIdentity& i) { i.ip_addresses = {"10.0.0.256"}; })},
      {"--ip", with([](ServiceIdentity& i) { i.ip_addresses = {"fd00::1::2"}; })},
      {"--ip", with([](ServiceIdentity& i) { i.ip_addresses = {"example.com"}; })},
  };
  for (const FieldCase& c : cases) {
    const Status status = ValidateIdentity(c.identity);
    ASSERT_FALSE(status.has_value()) << c.field;
    EXPECT_EQ(status.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(status.error().message(), StartsWith(c.field));
  }
}

TEST(PkiNames, FieldErrorsQuoteTheValue) {
  ServiceIdentity identity = Identity();
  identity.ip_addresses = {"1.2.3"};
  const Status status = ValidateIdentity(identity);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().message(), "--ip \"1.2.3\": not an IPv4 or IPv6 address");
}

TEST(PkiNames, ValidateDnsNameAllowsWildcardsOnlyWhenAsked) {
  EXPECT_TRUE(ValidateDnsName("*.example.com", Wildcard::kAllow).has_value());
  EXPECT_FALSE(ValidateDnsName("*.example.com", Wildcard::kReject).has_value());
  EXPECT_TRUE(ValidateDnsName("a-b.c0.example", Wildcard::kReject).has_value());
  EXPECT_FALSE(ValidateDnsName(std::string(64, 'a') + ".com", Wildcard::kReject).has_value());
  EXPECT_FALSE(ValidateDnsName("a.-b.com", Wildcard::kReject).has_value());
  EXPECT_TRUE(ValidateDnsName(std::string(63, 'a') + ".com", Wildcard::kReject).has_value());
}

TEST(PkiNames, ValidateIpAddressAcceptsBothFamilies) {
  EXPECT_TRUE(ValidateIpAddress("127.0.0.1").has_value());
  EXPECT_TRUE(ValidateIpAddress("::1").has_value());
  EXPECT_TRUE(ValidateIpAddress("2001:db8::ff00:42:8329").has_value());
  EXPECT_FALSE(ValidateIpAddress("").has_value());
  EXPECT_FALSE(ValidateIpAddress("1.2.3.4/32").has_value());
}

}  // namespace
}  // namespace names_test
// The host name check of Go's TLS client, which the API server runs on every webhook call.
TEST(SansCoverHost, DnsNamesMatchCaseInsensitivelyAndIgnoreATrailingDot) {
  const std::vector<std::string> dns = {"hook.infra.svc", "Other.Example.COM"};
  EXPECT_TRUE(SansCoverHost(dns, {}, "hook.infra.svc"));
  EXPECT_TRUE(SansCoverHost(dns, {}, "HOOK.infra.svc"));
  EXPECT_TRUE(SansCoverHost(dns, {}, "hook.infra.svc."));
  EXPECT_TRUE(SansCoverHost(dns, {}, "other.example.com"));
  EXPECT_FALSE(SansCoverHost(dns, {}, "hook.other.svc"));
  EXPECT_FALSE(SansCoverHost(dns, {}, "hook"));
  EXPECT_FALSE(SansCoverHost(dns, {}, "infra.svc"));
  EXPECT_FALSE(SansCoverHost({}, {}, "hook.infra.svc"));
}

TEST(SansCoverHost, AWildcardIsOneWholeLeftMostLabel) {
  const std::vector<std::string> dns = {"*.infra.svc"};
  EXPECT_TRUE(SansCoverHost(dns, {}, "hook.infra.svc"));
  EXPECT_TRUE(SansCoverHost(dns, {}, "Hook.Infra.Svc"));
  EXPECT_FALSE(SansCoverHost(dns, {}, "a.hook.infra.svc"));  // one label, not more
  EXPECT_FALSE(SansCoverHost(dns, {}, "infra.svc"));         // nor none
  // Partial wildcards and wildcards past the first label match only to the letter.
  EXPECT_FALSE(SansCoverHost({"h*.infra.svc"}, {}, "hook.infra.svc"));
  EXPECT_FALSE(SansCoverHost({"hook.*.svc"}, {}, "hook.infra.svc"));
  EXPECT_FALSE(SansCoverHost({"*"}, {}, "hook"));
  EXPECT_TRUE(SansCoverHost({"*.com"}, {}, "example.com"));
}

TEST(SansCoverHost, AnIpHostMatchesIpSansOnly) {
  EXPECT_TRUE(SansCoverHost({}, {"10.0.0.5"}, "10.0.0.5"));
  EXPECT_FALSE(SansCoverHost({"10.0.0.5"}, {}, "10.0.0.5"));  // a DNS SAN never
  EXPECT_FALSE(SansCoverHost({}, {"10.0.0.6"}, "10.0.0.5"));
  EXPECT_TRUE(SansCoverHost({}, {"fd00::1"}, "fd00:0:0::1"));
  EXPECT_TRUE(SansCoverHost({}, {"fd00::1"}, "[fd00::1]"));
  // An IPv4 address and its IPv4-mapped IPv6 form are one address, as in Go.
  EXPECT_TRUE(SansCoverHost({}, {"10.0.0.5"}, "::ffff:10.0.0.5"));
  EXPECT_FALSE(SansCoverHost({"*.0.0.5"}, {}, "10.0.0.5"));
}

TEST(SansCoverHost, NamesThatAreNoHostNamesMatchOnlyToTheLetter) {
  EXPECT_TRUE(SansCoverHost({"under_score.svc"}, {}, "under_score.svc"));
  EXPECT_TRUE(SansCoverHost({"*.svc"}, {}, "under_score.svc"));
  EXPECT_TRUE(SansCoverHost({"weird name"}, {}, "WEIRD NAME"));
  EXPECT_FALSE(SansCoverHost({"*.svc"}, {}, "weird name.svc"));
  EXPECT_FALSE(SansCoverHost({"."}, {}, "."));
  EXPECT_FALSE(SansCoverHost({""}, {}, ""));
}

}  // namespace certctl::pki
