#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/pki/issue.h"
#include "certctl/util/clock.h"

namespace certctl::testing {

// The CAs, leaves and Secrets the unit tests make, built in one place: each test says only
// what it varies. Build() records a test failure when issuing fails, and throws, so a broken
// issuer stops the test that used it.

// A self-signed CA: by default "test-ca", valid for a year from `now`, an ECDSA P-256 key.
class CaBuilder {
 public:
  explicit CaBuilder(std::string common_name = "test-ca");

  CaBuilder& At(TimePoint now);
  CaBuilder& Validity(std::chrono::seconds validity);
  CaBuilder& Key(pki::KeyType type);
  CaBuilder& Organization(std::string organization);

  pki::KeyPair Build() const;

 private:
  pki::CaRequest request_;
  TimePoint now_;
};

// A server certificate issued by `ca`: by default for "svc.ns.svc", valid for 90 days from
// `now`, an ECDSA P-256 key.
class LeafBuilder {
 public:
  explicit LeafBuilder(const pki::KeyPair& ca);

  LeafBuilder& At(TimePoint now);
  LeafBuilder& Validity(std::chrono::seconds validity);
  LeafBuilder& Key(pki::KeyType type);
  LeafBuilder& DnsNames(std::vector<std::string> names);
  LeafBuilder& IpAddresses(std::vector<std::string> addresses);

  pki::KeyPair Build() const;

 private:
  const pki::KeyPair& ca_;
  pki::LeafRequest request_;
  TimePoint now_;
};

// The PEM of a private key (PKCS#8), as a Secret's tls.key or ca.key holds it.
std::string KeyPem(const pki::PrivateKey& key);
// The certificates of `cas`, in this order, as one PEM bundle (a ca.crt, a caBundle).
std::string BundlePem(const std::vector<const pki::KeyPair*>& cas);

// A Secret object as the API server returns it: by default "webhook-server-cert" in "ns",
// type kubernetes.io/tls, labelled managed by certctl, no data.
class SecretBuilder {
 public:
  SecretBuilder(std::string ns = "ns", std::string name = "webhook-server-cert");

  // ca.crt = `bundle` (the first CA's certificate alone by default), ca.key = `ca`'s key,
  // tls.crt and tls.key = `leaf`'s.
  SecretBuilder& Pair(const pki::KeyPair& ca, const pki::KeyPair& leaf);
  SecretBuilder& Pair(const std::vector<const pki::KeyPair*>& bundle, const pki::KeyPair& ca,
                      const pki::KeyPair& leaf);
  // One data key, base64 of `value`; Without removes one.
  SecretBuilder& Data(const std::string& key, const std::string& value);
  SecretBuilder& Without(const std::string& key);
  SecretBuilder& Type(std::string type);
  // Replaces every label with `labels` (an object): {} for a Secret certctl did not create.
  SecretBuilder& Labels(nlohmann::json labels);
  SecretBuilder& ResourceVersion(std::string version);

  nlohmann::json Build() const { return secret_; }
  operator nlohmann::json() const { return Build(); }  // NOLINT: builder reads as the object

 private:
  nlohmann::json secret_;
};

}  // namespace certctl::testing
