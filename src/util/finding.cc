#include "certctl/util/finding.h"

#include <algorithm>
#include <array>
#include <utility>

namespace certctl {
namespace {

constexpr std::array<std::pair<FindingCode, std::string_view>, 30> kNames = {{
    {FindingCode::kMissing, "missing"},
    {FindingCode::kUnparsable, "unparsable"},
    {FindingCode::kExpired, "expired"},
    {FindingCode::kNotYetValid, "not-yet-valid"},
    {FindingCode::kExpiringSoon, "expiring-soon"},
    {FindingCode::kSanMissing, "san-missing"},
    {FindingCode::kKeyMismatch, "key-mismatch"},
    {FindingCode::kUntrustedChain, "untrusted-chain"},
    {FindingCode::kNotACa, "not-a-ca"},
    {FindingCode::kWrongUsage, "wrong-usage"},
    {FindingCode::kWeakKey, "weak-key"},
    {FindingCode::kWeakSignature, "weak-signature"},
    {FindingCode::kWrongType, "wrong-type"},
    {FindingCode::kCaBundleMismatch, "ca-bundle-mismatch"},
    {FindingCode::kTargetMissing, "target-missing"},
    {FindingCode::kTargetNameNotCovered, "target-name-not-covered"},
    {FindingCode::kTargetInvalid, "target-invalid"},
    {FindingCode::kServiceMissing, "service-missing"},
    {FindingCode::kServicePortMissing, "service-port-missing"},
    {FindingCode::kNoReadyEndpoints, "no-ready-endpoints"},
    {FindingCode::kRotationStateInvalid, "rotation-state-invalid"},
    {FindingCode::kCaBundleUnparsable, "ca-bundle-unparsable"},
    {FindingCode::kCaBundleExpired, "ca-bundle-expired"},
    {FindingCode::kCaBundleExpiringSoon, "ca-bundle-expiring-soon"},
    {FindingCode::kCaBundleMissing, "ca-bundle-missing"},
    {FindingCode::kSelfDeadlock, "self-deadlock"},
    {FindingCode::kTimeoutsAddUp, "timeouts-add-up"},
    {FindingCode::kHandshakeFailed, "handshake-failed"},
    {FindingCode::kServingCertExpiringSoon, "serving-cert-expiring-soon"},
    {FindingCode::kConflictingConfiguration, "conflicting-configuration"},
}};

}  // namespace

std::string_view FindingCodeName(FindingCode code) {
  for (const auto& [candidate, name] : kNames) {
    if (candidate == code) {
      return name;
    }
  }
  return "unknown";
}

std::optional<FindingCode> ParseFindingCode(std::string_view name) {
  for (const auto& [code, candidate] : kNames) {
    if (candidate == name) {
      return code;
    }
  }
  return std::nullopt;
}

std::string FindingHelp(FindingCode code) {
  return "docs/troubleshooting.md#" + std::string(FindingCodeName(code));
}

std::string FindingHelpLine(const std::vector<FindingCode>& codes) {
  std::vector<FindingCode> seen;
  std::string line;
  for (const FindingCode code : codes) {
    if (std::find(seen.begin(), seen.end(), code) != seen.end()) {
      continue;
    }
    seen.push_back(code);
    line += (line.empty() ? "what to do: " : ", ") + FindingHelp(code);
  }
  return line;
}

std::string JoinFindings(const std::vector<Finding>& findings) {
  std::string text;
  for (const Finding& finding : findings) {
    text += text.empty() ? "" : "; ";
    text += finding.object + ": " + finding.message;
  }
  return text;
}

}  // namespace certctl
