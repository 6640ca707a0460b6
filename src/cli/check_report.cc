#include "cli/check_report.h"

#include <vector>

#include "certctl/util/duration.h"
#include "certctl/util/finding.h"

namespace certctl::cli {
namespace {

nlohmann::ordered_json CertificateToJson(const pki::CertificateInfo& info) {
  return {
      {"subject", info.subject},
      {"issuer", info.issuer},
      {"serial", info.serial_hex},
      {"notBefore", FormatRfc3339(info.not_before)},
      {"notAfter", FormatRfc3339(info.not_after)},
      {"dnsNames", info.dns_names},
      {"ipAddresses", info.ip_addresses},
      {"keyType", info.key.name},
      {"isCA", info.is_ca},
      {"signatureAlgorithm", info.signature_algorithm},
      {"sha256Fingerprint", info.sha256_fingerprint},
  };
}

}  // namespace

nlohmann::ordered_json CheckReportToJson(const controller::CheckReport& report) {
  nlohmann::ordered_json ca = nlohmann::ordered_json::array();
  for (const pki::CertificateInfo& info : report.validation.ca) {
    ca.push_back(CertificateToJson(info));
  }
  nlohmann::ordered_json targets = nlohmann::ordered_json::array();
  for (const controller::TargetStatus& target : report.targets) {
    targets.push_back({{"kind", target.kind},
                       {"name", target.name},
                       {"webhook", target.webhook},
                       {"calls", target.calls},
                       {"ok", target.ok}});
  }
  nlohmann::ordered_json findings = nlohmann::ordered_json::array();
  for (const Finding& finding : report.AllFindings()) {
    findings.push_back({{"code", FindingCodeName(finding.code)},
                        {"object", finding.object},
                        {"message", finding.message}});
  }
  return {
      {"ok", findings.empty()},
      {"source", report.source},
      {"certificates",
       {{"ca", std::move(ca)},
        {"leaf", report.validation.leaf ? CertificateToJson(*report.validation.leaf)
                                        : nlohmann::ordered_json(nullptr)}}},
      {"targets", std::move(targets)},
      {"findings", std::move(findings)},
      {"notes", report.notes},
  };
}

nlohmann::ordered_json CheckErrorToJson(const std::string& message) {
  return {{"ok", false}, {"error", message}};
}

std::string CheckReportToText(const controller::CheckReport& report) {
  const std::vector<Finding> findings = report.AllFindings();
  std::string out;
  if (findings.empty()) {
    out = "ok: " + report.source;
    const auto& validation = report.validation;
    if (validation.issuer_index && *validation.issuer_index < validation.ca.size()) {
      const auto& ca = validation.ca[*validation.issuer_index];
      out += ": CA \"" + ca.common_name + "\" valid until " + FormatRfc3339(ca.not_after);
    }
    if (validation.leaf) {
      out += ", server certificate \"" + validation.leaf->common_name + "\" valid until " +
             FormatRfc3339(validation.leaf->not_after);
    }
    if (!report.targets.empty()) {
      out += ", " + std::to_string(report.targets.size()) +
             " caBundle(s) up to date, every name they call covered";
    }
    out += "\n";
  }
  std::vector<FindingCode> codes;
  for (const Finding& finding : findings) {
    out += finding.object + ": " + finding.message + " [" +
           std::string(FindingCodeName(finding.code)) + "]\n";
    codes.push_back(finding.code);
  }
  if (!codes.empty()) {
    out += FindingHelpLine(codes) + "\n";
  }
  for (const std::string& note : report.notes) {
    out += "note: " + note + "\n";
  }
  return out;
}

}  // namespace certctl::cli
