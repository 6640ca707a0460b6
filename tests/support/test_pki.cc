#include "support/test_pki.h"

#include <utility>

#include <gtest/gtest.h>

#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"

namespace certctl::testing {

namespace {
constexpr std::chrono::hours kDay{24};
}  // namespace

CaBuilder::CaBuilder(std::string common_name) : now_(std::chrono::system_clock::now()) {
  request_.common_name = std::move(common_name);
  request_.validity = 365 * kDay;
}

CaBuilder& CaBuilder::At(TimePoint now) {
  now_ = now;
  return *this;
}

CaBuilder& CaBuilder::Validity(std::chrono::seconds validity) {
  request_.validity = validity;
  return *this;
}

CaBuilder& CaBuilder::Key(pki::KeyType type) {
  request_.key_type = type;
  return *this;
}

CaBuilder& CaBuilder::Organization(std::string organization) {
  request_.organization = std::move(organization);
  return *this;
}

pki::KeyPair CaBuilder::Build() const {
  auto ca = pki::IssueCa(request_, now_);
  EXPECT_TRUE(ca.has_value()) << "CA " << request_.common_name << ": " << ca.error().message();
  return std::move(ca).value();  // throws on failure: the test stops there
}

LeafBuilder::LeafBuilder(const pki::KeyPair& ca) : ca_(ca), now_(std::chrono::system_clock::now()) {
  request_.dns_names = {"svc.ns.svc"};
  request_.validity = 90 * kDay;
}

LeafBuilder& LeafBuilder::At(TimePoint now) {
  now_ = now;
  return *this;
}

LeafBuilder& LeafBuilder::Validity(std::chrono::seconds validity) {
  request_.validity = validity;
  return *this;
}

LeafBuilder& LeafBuilder::Key(pki::KeyType type) {
  request_.key_type = type;
  return *this;
}

LeafBuilder& LeafBuilder::DnsNames(std::vector<std::string> names) {
  request_.dns_names = std::move(names);
  return *this;
}

LeafBuilder& LeafBuilder::IpAddresses(std::vector<std::string> addresses) {
  request_.ip_addresses = std::move(addresses);
  return *this;
}

pki::KeyPair LeafBuilder::Build() const {
  auto leaf = pki::IssueLeaf(request_, ca_, now_);
  EXPECT_TRUE(leaf.has_value()) << "leaf: " << leaf.error().message();
  return std::move(leaf).value();  // throws on failure: the test stops there
}

std::string KeyPem(const pki::PrivateKey& key) {
  auto pem = key.ToPem();
  EXPECT_TRUE(pem.has_value()) << pem.error().message();
  return pem.value_or("");
}

std::string BundlePem(const std::vector<const pki::KeyPair*>& cas) {
  std::vector<pki::Certificate> certificates;
  for (const pki::KeyPair* ca : cas) {
    certificates.push_back(ca->certificate);
  }
  return pki::EncodeCertificateBundle(certificates);
}

SecretBuilder::SecretBuilder(std::string ns, std::string name)
    : secret_({{"apiVersion", "v1"},
               {"kind", "Secret"},
               {"metadata",
                {{"name", std::move(name)},
                 {"namespace", std::move(ns)},
                 {"labels", {{"app.kubernetes.io/managed-by", "certctl"}}}}},
               {"type", "kubernetes.io/tls"},
               {"data", nlohmann::json::object()}}) {}

SecretBuilder& SecretBuilder::Pair(const pki::KeyPair& ca, const pki::KeyPair& leaf) {
  return Pair({&ca}, ca, leaf);
}

SecretBuilder& SecretBuilder::Pair(const std::vector<const pki::KeyPair*>& bundle,
                                   const pki::KeyPair& ca, const pki::KeyPair& leaf) {
  Data("ca.crt", BundlePem(bundle));
  Data("ca.key", KeyPem(ca.key));
  Data("tls.crt", leaf.certificate.ToPem());
  return Data("tls.key", KeyPem(leaf.key));
}

SecretBuilder& SecretBuilder::Data(const std::string& key, const std::string& value) {
  secret_["data"][key] = Base64Encode(value);
  return *this;
}

SecretBuilder& SecretBuilder::Without(const std::string& key) {
  secret_["data"].erase(key);
  return *this;
}

SecretBuilder& SecretBuilder::Type(std::string type) {
  secret_["type"] = std::move(type);
  return *this;
}

SecretBuilder& SecretBuilder::Labels(nlohmann::json labels) {
  secret_["metadata"]["labels"] = std::move(labels);
  return *this;
}

SecretBuilder& SecretBuilder::ResourceVersion(std::string version) {
  secret_["metadata"]["resourceVersion"] = std::move(version);
  return *this;
}

}  // namespace certctl::testing
