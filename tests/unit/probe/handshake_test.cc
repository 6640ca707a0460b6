#include "certctl/probe/handshake.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/pki/issue.h"

#include "support/test_pki.h"
#include "support/tls_server.h"

namespace certctl::probe {
namespace handshake_test {
namespace {

using testing::CaBuilder;
using ::testing::HasSubstr;
using testing::KeyPem;
using testing::LeafBuilder;
using testing::TlsServer;
using namespace std::chrono_literals;

constexpr char kServiceName[] = "hook.infra.svc";

struct Pki {
  pki::KeyPair ca;
  std::string ca_pem;
  std::string leaf_pem;
  std::string key_pem;
};

Pki MakePki(const std::string& leaf_name) {
  Pki made{CaBuilder("hook-ca").Build(), "", "", ""};
  made.ca_pem = made.ca.certificate.ToPem();
  const pki::KeyPair leaf = LeafBuilder(made.ca).DnsNames({leaf_name}).Build();
  made.leaf_pem = leaf.certificate.ToPem();
  made.key_pem = KeyPem(leaf.key);
  return made;
}

HostPort Loopback(int port) { return {"127.0.0.1", port}; }

TEST(VerifyHandshake, SucceedsWhenTheServedLeafChainsToTheBundleAndNamesTheService) {
  const Pki pki = MakePki(kServiceName);
  const TlsServer server(TlsServer::Mode::kTls, pki.leaf_pem, pki.key_pem);
  const auto verified = VerifyHandshake(Loopback(server.port()), kServiceName, pki.ca_pem, 2s);
  EXPECT_TRUE(verified) << verified.error().message();
  // The server counts once its side is done, which may be just after the client's.
  for (int wait = 0; wait < 100 && server.handshakes() == 0; ++wait) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(server.handshakes(), 1);
}

TEST(VerifyHandshake, ABundleWithTheOldAndTheNewCaTrustsEither) {
  const Pki current = MakePki(kServiceName);
  const Pki previous = MakePki(kServiceName);
  const TlsServer server(TlsServer::Mode::kTls, current.leaf_pem, current.key_pem);
  EXPECT_TRUE(
      VerifyHandshake(Loopback(server.port()), kServiceName, previous.ca_pem + current.ca_pem, 2s));
}

TEST(VerifyHandshake, ALeafFromAnotherCaIsRefusedWithOpenSslsReason) {
  const Pki served = MakePki(kServiceName);
  const Pki trusted = MakePki(kServiceName);
  const TlsServer server(TlsServer::Mode::kTls, served.leaf_pem, served.key_pem);
  const auto verified = VerifyHandshake(Loopback(server.port()), kServiceName, trusted.ca_pem, 2s);
  ASSERT_FALSE(verified);
  EXPECT_EQ(verified.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(verified.error().message(),
              HasSubstr("TLS handshake with 127.0.0.1:" + std::to_string(server.port())));
  EXPECT_THAT(verified.error().message(), HasSubstr("does not verify against the caBundle"));
  EXPECT_THAT(verified.error().message(), HasSubstr("local issuer"));
}

TEST(VerifyHandshake, ALeafForAnotherNameIsRefused) {
  const Pki pki = MakePki("other.infra.svc");
  const TlsServer server(TlsServer::Mode::kTls, pki.leaf_pem, pki.key_pem);
  const auto verified = VerifyHandshake(Loopback(server.port()), kServiceName, pki.ca_pem, 2s);
  ASSERT_FALSE(verified);
  EXPECT_EQ(verified.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(verified.error().message(), HasSubstr("not valid for hook.infra.svc"));
}

TEST(VerifyHandshake, NoListenerIsUnavailable) {
  int closed_port = 0;
  {
    const TlsServer gone(TlsServer::Mode::kPlaintext);
    closed_port = gone.port();
  }
  const Pki pki = MakePki(kServiceName);
  const auto verified = VerifyHandshake(Loopback(closed_port), kServiceName, pki.ca_pem, 2s);
  ASSERT_FALSE(verified);
  EXPECT_EQ(verified.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(verified.error().message(), HasSubstr("cannot connect to 127.0.0.1:"));
  EXPECT_THAT(verified.error().message(), HasSubstr("refused"));
}

TEST(VerifyHandshake, ASilentListenerTimesOutWithinTheBound) {
  const TlsServer server(TlsServer::Mode::kSilent);
  const Pki pki = MakePki(kServiceName);
  const auto verified = VerifyHandshake(Loopback(server.port()), kServiceName, pki.ca_pem, 200ms);
  ASSERT_FALSE(verified);
  EXPECT_EQ(verified.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(verified.error().message(), HasSubstr("timed out"));
}

TEST(VerifyHandshake, APlaintextListenerFailsTheHandshake) {
  const TlsServer server(TlsServer::Mode::kPlaintext);
  const Pki pki = MakePki(kServiceName);
  const auto verified = VerifyHandshake(Loopback(server.port()), kServiceName, pki.ca_pem, 2s);
  ASSERT_FALSE(verified);
  EXPECT_EQ(verified.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(verified.error().message(), HasSubstr("TLS handshake with 127.0.0.1:"));
}

TEST(VerifyHandshake, ABundleWithoutACertificateIsRefusedBeforeConnecting) {
  const TlsServer server(TlsServer::Mode::kSilent);
  const auto verified = VerifyHandshake(Loopback(server.port()), kServiceName, "garbage", 2s);
  ASSERT_FALSE(verified);
  EXPECT_EQ(verified.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(verified.error().message(), HasSubstr("caBundle holds no certificate"));
}

TEST(DialAsApiServer, ACompletedHandshakeHandsBackTheServedLeaf) {
  const Pki pki = MakePki(kServiceName);
  const TlsServer server(TlsServer::Mode::kTls, pki.leaf_pem, pki.key_pem);
  const HandshakeOutcome outcome =
      DialAsApiServer(Loopback(server.port()), kServiceName, pki.ca_pem, 2s);
  EXPECT_TRUE(outcome.status) << outcome.status.error().message();
  EXPECT_FALSE(outcome.name_not_covered);
  EXPECT_EQ(outcome.served_leaf_pem, pki.leaf_pem);
}

TEST(DialAsApiServer, ATrustedLeafForAnotherNameIsToldApartFromAnUntrustedOne) {
  const Pki other_name = MakePki("other.infra.svc");
  const TlsServer wrong_name(TlsServer::Mode::kTls, other_name.leaf_pem, other_name.key_pem);
  const HandshakeOutcome named =
      DialAsApiServer(Loopback(wrong_name.port()), kServiceName, other_name.ca_pem, 2s);
  ASSERT_FALSE(named.status);
  EXPECT_TRUE(named.name_not_covered);

  const Pki trusted = MakePki(kServiceName);
  const HandshakeOutcome untrusted =
      DialAsApiServer(Loopback(wrong_name.port()), kServiceName, trusted.ca_pem, 2s);
  ASSERT_FALSE(untrusted.status);
  EXPECT_FALSE(untrusted.name_not_covered);
}

TEST(DialAsApiServer, NoListenerServesNothing) {
  int closed_port = 0;
  {
    const TlsServer gone(TlsServer::Mode::kPlaintext);
    closed_port = gone.port();
  }
  const Pki pki = MakePki(kServiceName);
  const HandshakeOutcome outcome =
      DialAsApiServer(Loopback(closed_port), kServiceName, pki.ca_pem, 2s);
  ASSERT_FALSE(outcome.status);
  EXPECT_FALSE(outcome.name_not_covered);
  EXPECT_TRUE(outcome.served_leaf_pem.empty());
}

}  // namespace
}  // namespace handshake_test
}  // namespace certctl::probe
