// Micro-benchmarks of the pki module. Not a test: run by hand (see bench/README.md).
#include <cstdlib>
#include <iostream>

#include <benchmark/benchmark.h>

#include "certctl/pki/issue.h"
#include "certctl/pki/names.h"
#include "certctl/pki/validate.h"

namespace certctl::pki {
namespace {

const TimePoint kNow = std::chrono::system_clock::now();

ServiceIdentity SampleIdentity() {
  ServiceIdentity identity;
  identity.service = "webhook";
  identity.namespace_name = "infra";
  return identity;
}

template <typename T>
T Unwrap(Result<T> result) {
  if (!result) {
    std::cerr << "benchmark setup failed: " << result.error().message() << "\n";
    std::abort();
  }
  return std::move(*result);
}

void BM_GenerateKey(benchmark::State& state) {
  const auto type = static_cast<KeyType>(state.range(0));
  state.SetLabel(std::string(KeyTypeName(type)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(Unwrap(PrivateKey::Generate(type)));
  }
}
BENCHMARK(BM_GenerateKey)
    ->DenseRange(0, 4)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);  // RSA-4096 takes seconds; a few rounds show the spread

void BM_IssueCaAndLeaf(benchmark::State& state) {
  const auto type = static_cast<KeyType>(state.range(0));
  state.SetLabel(std::string(KeyTypeName(type)));
  const ServiceIdentity identity = SampleIdentity();
  for (auto _ : state) {
    CaRequest ca_request{"webhook-ca", "", type};
    const KeyPair ca = Unwrap(IssueCa(ca_request, kNow));
    LeafRequest leaf_request{RequiredDnsNames(identity), {}, type};
    benchmark::DoNotOptimize(Unwrap(IssueLeaf(leaf_request, ca, kNow)));
  }
}
BENCHMARK(BM_IssueCaAndLeaf)
    ->Arg(static_cast<int>(KeyType::kEcdsaP256))
    ->Arg(static_cast<int>(KeyType::kRsa2048))
    ->Unit(benchmark::kMillisecond);

void BM_ValidatePair(benchmark::State& state) {
  const ServiceIdentity identity = SampleIdentity();
  const KeyPair ca = Unwrap(IssueCa({"webhook-ca", "", KeyType::kEcdsaP256}, kNow));
  const KeyPair leaf =
      Unwrap(IssueLeaf({RequiredDnsNames(identity), {}, KeyType::kEcdsaP256}, ca, kNow));
  PairSource source;
  source.ca_pem = ca.certificate.ToPem();
  source.ca_key_pem = Unwrap(ca.key.ToPem());
  source.cert_pem = leaf.certificate.ToPem();
  source.key_pem = Unwrap(leaf.key.ToPem());
  ValidationPolicy policy;
  policy.dns_names = RequiredDnsNames(identity);
  for (auto _ : state) {
    const ValidationReport report = Validate(source, policy, kNow);
    if (!report.ok()) {
      state.SkipWithError("generated pair did not validate");
    }
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_ValidatePair)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace certctl::pki

BENCHMARK_MAIN();
