#include "cli/audit.h"

#include <algorithm>
#include <iostream>
#include <thread>
#include <vector>

#include "certctl/audit/audit.h"

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
  AddConnectionFlags(*command, options.connection, &options.contexts);
  command
      ->add_flag("--all-contexts", options.all_contexts,
                 "Audit every context of the kubeconfig, in parallel: one report per context")
      ->excludes("--context");
  command->add_flag("--handshake", options.handshake,
                    "Also dial each entry as the API server would (a ready endpoint of its "
                    "Service, or its URL) and verify the certificate served against its caBundle "
                    "and the name it calls; for where those addresses are reachable, such as a "
                    "Job in the cluster");
  command
      ->add_option("--webhook-selector", options.selector,
                   "Label selector: audit only the objects of the four kinds matching it")
      ->type_name("SELECTOR")
      ->check(LabelSelectorCheck());
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

namespace {

// One cluster's audit, or why it could not run.
Result<audit::AuditReport> AuditCluster(const AuditOptions& options,
                                        const ConnectionFlags& connection, const Environment& env,
                                        const Clock& clock) {
  auto cluster = ConnectToCluster(connection, "", env, clock, ReportClientOptions());
  if (!cluster) {
    return Fail(cluster.error());
  }
  audit::AuditOptions audit_options;
  audit_options.selector = options.selector;
  audit_options.renew_before = options.renew_before;
  audit_options.handshake = options.handshake;
  return audit::Audit(*cluster->client, audit_options, clock.Now());
}

}  // namespace

int RunAudit(const AuditOptions& options, const std::string& command, const Environment& env,
             const Clock& clock) {
  const auto could_not_run = [&](const std::string& message) {
    return CouldNotRun(command, message, options.output);
  };
  const audit::Severity fail_on =
      audit::ParseSeverity(options.fail_on).value_or(audit::Severity::kCritical);
  std::vector<std::string> contexts = options.contexts;
  if (options.all_contexts || contexts.size() > 1) {
    // In a pod the connection would be the service account's whatever the context.
    if (options.connection.kubeconfig.empty() &&
        !env.Get("KUBERNETES_SERVICE_HOST").value_or("").empty()) {
      return could_not_run(
          "--all-contexts and a repeated --context read a kubeconfig, but KUBERNETES_SERVICE_HOST "
          "is set (in-cluster): pass --kubeconfig");
    }
  }
  if (options.all_contexts) {
    auto listed = kube::KubeconfigContexts({options.connection.kubeconfig, ""}, env);
    if (!listed) {
      return could_not_run(listed.error().message());
    }
    if (listed->empty()) {
      return could_not_run("the kubeconfig has no contexts");
    }
    contexts = std::move(*listed);
  }

  if (!options.all_contexts && contexts.size() <= 1) {
    ConnectionFlags connection = options.connection;
    connection.context = contexts.empty() ? "" : contexts.front();
    auto report = AuditCluster(options, connection, env, clock);
    if (!report) {
      return could_not_run(report.error().message());
    }
    if (options.output == "json") {
      std::cout << AuditReportToJson(*report, fail_on).dump(2) << "\n";
    } else {
      std::cout << AuditReportToText(*report);
    }
    std::cout.flush();
    return report->Fails(fail_on) ? kExitFailed : kExitOk;
  }

  // Clusters answer at their own pace: each context is audited on a thread of its own, so one
  // slow or unreachable cluster delays the report by its own timeout only.
  std::vector<ContextAudit> audits(contexts.size());
  std::vector<std::thread> workers;
  workers.reserve(contexts.size());
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    workers.emplace_back([&, i] {
      ConnectionFlags connection = options.connection;
      connection.context = contexts[i];
      audits[i].context = contexts[i];
      auto report = AuditCluster(options, connection, env, clock);
      if (report) {
        audits[i].report = std::move(*report);
      } else {
        audits[i].error = report.error().message();
      }
    });
  }
  for (std::thread& worker : workers) {
    worker.join();
  }
  if (options.output == "json") {
    std::cout << FleetToJson(audits, fail_on).dump(2) << "\n";
  } else {
    std::cout << FleetToText(audits);
  }
  std::cout.flush();
  bool failed = false;
  bool unaudited = false;
  for (const ContextAudit& audited : audits) {
    failed = failed || (audited.report && audited.report->Fails(fail_on));
    unaudited = unaudited || !audited.report;
  }
  if (unaudited) {
    std::cerr << command << ": "
              << std::count_if(audits.begin(), audits.end(),
                               [](const ContextAudit& audited) { return !audited.report; })
              << " of " << audits.size() << " contexts could not be audited; the report says why\n";
  }
  return failed ? kExitFailed : unaudited ? kExitUsage : kExitOk;
}

}  // namespace certctl::cli
