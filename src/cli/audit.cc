#include "cli/audit.h"

#include <iostream>

#include "certctl/audit/audit.h"
#include "certctl/kube/selector.h"

#include "cli/audit_report.h"
#include "cli/check.h"
#include "cli/exit_codes.h"
#include "cli/flags.h"

namespace certctl::cli {

CLI::App* AddAuditCommand(CLI::App& app, AuditOptions& options) {
  CLI::App* command = app.add_subcommand(
      "audit",
      "Report what the API server meets when it calls each webhook in the cluster (validating "
      "and mutating webhooks, CRD conversion webhooks, APIServices), whoever manages them; "
      "writes nothing");
  AddConnectionFlags(*command, options.connection);
  command
      ->add_option("--webhook-selector", options.selector,
                   "Label selector: audit only the objects of the four kinds matching it")
      ->type_name("SELECTOR")
      ->check(
          [](const std::string& text) {
            auto valid = kube::ValidateLabelSelector(text);
            return valid ? std::string() : valid.error().message();
          },
          "");
  AddDurationFlag(*command, "--renew-before", options.renew_before,
                  "Report caBundles whose certificates all end within this", /*allow_zero=*/true);
  command
      ->add_option("--fail-on", options.fail_on,
                   "Exit 1 when a finding of this severity or above is found")
      ->check(CLI::IsMember({"warning", "critical"}))
      ->capture_default_str();
  command->add_option("-o,--output", options.output, "Report format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return command;
}

int RunAudit(const AuditOptions& options, const std::string& command, const Environment& env,
             const Clock& clock) {
  const auto could_not_run = [&](const std::string& message) {
    return CouldNotRun(command, message, options.output);
  };
  auto cluster = ConnectToCluster(options.connection, "", env, clock, ReportClientOptions());
  if (!cluster) {
    return could_not_run(cluster.error().message());
  }
  audit::AuditOptions audit_options;
  audit_options.selector = options.selector;
  audit_options.renew_before = options.renew_before;
  auto report = audit::Audit(*cluster->client, audit_options, clock.Now());
  if (!report) {
    return could_not_run(report.error().message());
  }
  const audit::Severity fail_on =
      audit::ParseSeverity(options.fail_on).value_or(audit::Severity::kCritical);
  if (options.output == "json") {
    std::cout << AuditReportToJson(*report, fail_on).dump(2) << "\n";
  } else {
    std::cout << AuditReportToText(*report);
  }
  std::cout.flush();
  return report->Fails(fail_on) ? kExitFailed : kExitOk;
}

}  // namespace certctl::cli
