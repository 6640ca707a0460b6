#include "cli/audit_report.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "certctl/util/duration.h"
#include "certctl/util/finding.h"

namespace certctl::cli {
namespace {

nlohmann::ordered_json FindingToJson(const audit::AuditFinding& finding) {
  return {{"code", FindingCodeName(finding.code)},
          {"severity", audit::SeverityName(finding.severity)},
          {"object", finding.object},
          {"entry", finding.entry},
          {"message", finding.message}};
}

// Which annotation asks for the object's CA, and from which Secret; null when none does.
nlohmann::ordered_json InjectedFromToJson(const audit::AuditedEntry& entry) {
  if (entry.injected_from.empty()) {
    return nullptr;
  }
  return {{"annotation", entry.injection_annotation}, {"secret", entry.injected_from}};
}

}  // namespace

nlohmann::ordered_json AuditReportToJson(const audit::AuditReport& report,
                                         audit::Severity fail_on) {
  nlohmann::ordered_json objects = nlohmann::ordered_json::array();
  for (const audit::AuditedEntry& entry : report.entries) {
    nlohmann::ordered_json findings = nlohmann::ordered_json::array();
    for (const audit::AuditFinding& finding : entry.findings) {
      findings.push_back(FindingToJson(finding));
    }
    objects.push_back({{"kind", entry.kind},
                       {"name", entry.name},
                       {"entry", entry.entry},
                       {"calls", entry.calls},
                       {"failurePolicy", entry.failure_policy.empty()
                                             ? nlohmann::ordered_json(nullptr)
                                             : nlohmann::ordered_json(entry.failure_policy)},
                       {"injectedFrom", InjectedFromToJson(entry)},
                       {"caBundle",
                        {{"certificates", entry.bundle_certificates},
                         {"notAfter", entry.bundle_not_after ? nlohmann::ordered_json(FormatRfc3339(
                                                                   *entry.bundle_not_after))
                                                             : nlohmann::ordered_json(nullptr)}}},
                       {"findings", std::move(findings)}});
  }
  nlohmann::ordered_json findings = nlohmann::ordered_json::array();
  for (const audit::AuditFinding& finding : report.findings) {
    findings.push_back(FindingToJson(finding));
  }
  return {{"ok", !report.Fails(fail_on)},
          {"handshake", report.handshake},
          {"objects", std::move(objects)},
          {"findings", std::move(findings)},
          {"notes", report.notes}};
}

std::string AuditReportToText(const audit::AuditReport& report) {
  std::string text;
  int critical = 0;
  std::vector<FindingCode> codes;
  for (const audit::AuditFinding& finding : report.findings) {
    critical += finding.severity == audit::Severity::kCritical ? 1 : 0;
    text += std::string(audit::SeverityName(finding.severity)) + " " + finding.object +
            (finding.entry.empty() ? "" : " " + finding.entry) + ": " + finding.message + " [" +
            std::string(FindingCodeName(finding.code)) + "]\n";
    codes.push_back(finding.code);
  }
  if (!codes.empty()) {
    text += FindingHelpLine(codes) + "\n";
  }
  for (const std::string& note : report.notes) {
    text += "note: " + note + "\n";
  }
  std::set<std::pair<std::string, std::string>> objects;
  std::map<std::string, std::set<std::pair<std::string, std::string>>> asking;  // by annotation
  for (const audit::AuditedEntry& entry : report.entries) {
    objects.insert({entry.kind, entry.name});
    if (!entry.injection_annotation.empty()) {
      asking[entry.injection_annotation].insert({entry.kind, entry.name});
    }
  }
  for (const auto& [annotation, annotated] : asking) {
    text += std::to_string(annotated.size()) + " object" + (annotated.size() == 1 ? "" : "s") +
            " ask" + (annotated.size() == 1 ? "s" : "") + " for a CA bundle by " + annotation +
            (annotation.starts_with("certctl.io/") ? " (certctl controller)" : "") + "\n";
  }
  if (!report.handshake && !report.entries.empty()) {
    // So that a clean summary is not read as "every webhook can be called".
    text +=
        "not checked: the certificates the webhooks serve (the names they cover, their chain "
        "and dates); certctl audit --handshake dials each entry as the API server does\n";
  }
  const int warnings = static_cast<int>(report.findings.size()) - critical;
  text += "audited " + std::to_string(report.entries.size()) + " entr" +
          (report.entries.size() == 1 ? "y" : "ies") + " of " + std::to_string(objects.size()) +
          " object" + (objects.size() == 1 ? "" : "s") + ": " + std::to_string(critical) +
          " critical, " + std::to_string(warnings) + " warning" + (warnings == 1 ? "" : "s") + "\n";
  return text;
}

nlohmann::ordered_json FleetToJson(const std::vector<ContextAudit>& audits,
                                   audit::Severity fail_on) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ContextAudit& audited : audits) {
    nlohmann::ordered_json document = {{"context", audited.context}};
    if (audited.report) {
      nlohmann::ordered_json report = AuditReportToJson(*audited.report, fail_on);
      for (auto& [key, value] : report.items()) {
        document[key] = std::move(value);
      }
    } else {
      document["ok"] = false;
      document["error"] = audited.error;
    }
    list.push_back(std::move(document));
  }
  return list;
}

std::string FleetToText(const std::vector<ContextAudit>& audits) {
  std::string text;
  for (const ContextAudit& audited : audits) {
    text += "context " + audited.context + ":\n";
    const std::string body = audited.report ? AuditReportToText(*audited.report)
                                            : "could not audit: " + audited.error + "\n";
    std::size_t start = 0;
    while (start < body.size()) {
      const std::size_t end = body.find('\n', start);
      text += "  " + body.substr(start, end - start) + "\n";
      start = end == std::string::npos ? body.size() : end + 1;
    }
  }
  return text;
}

}  // namespace certctl::cli
