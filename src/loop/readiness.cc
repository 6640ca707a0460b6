// The sidecar's readiness: its named checks, the ready file, the ready gauge and log line.
#include <fstream>
#include <map>
#include <system_error>

#include "certctl/loop/events.h"
#include "certctl/loop/sidecar.h"

namespace certctl::loop {

std::optional<std::string> Sidecar::NotReady(const std::set<std::string>& excluded) const {
  for (const ReadinessCheck& check : Readiness()) {
    if (!check.ok && !excluded.contains(check.name)) {
      return check.name == "certificate" ? check.reason : check.name + ": " + check.reason;
    }
  }
  return std::nullopt;
}

std::vector<ReadinessCheck> Sidecar::Readiness() const {
  const std::lock_guard lock(state_mutex_);
  std::vector<ReadinessCheck> checks{certificate_, injected_, callable_};
  if (serving_) {
    checks.push_back(*serving_);
  }
  return checks;
}

bool Sidecar::ReadyLocked() const {
  return certificate_.ok && injected_.ok && callable_.ok && (!serving_ || serving_->ok);
}

void Sidecar::SetCertificateReadiness(bool ready, const std::string& reason,
                                      std::vector<std::string> target_bundles,
                                      std::optional<std::pair<bool, std::string>> injected) {
  {
    const std::lock_guard lock(state_mutex_);
    const bool was_ready = ReadyLocked();
    const bool file_was = certificate_.ok && injected_.ok;
    const bool changed = ready != certificate_.ok;
    certificate_.ok = ready;
    certificate_.reason = reason;
    if (injected) {
      injected_.ok = injected->first;
      injected_.unknown = false;
      injected_.reason = injected->second;
    }
    target_bundles_ = std::move(target_bundles);
    // Until the serving loop answers for this certificate, say what it is doing, not what
    // it last waited for.
    if (serving_ && !serving_->ok && changed) {
      serving_->reason =
          ready ? "checking the handshake with " + FormatHostPort(config_.serving->address)
                : "waiting for the certificate";
    }
    FollowReadyFileLocked(file_was);
    PublishReadiness(was_ready);
  }
  if (config_.serving) {
    {
      const std::lock_guard lock(stop_mutex_);
      serving_probe_due_ = true;
    }
    stop_changed_.notify_all();
  }
}

void Sidecar::SetTargetChecksUnknown(const std::string& reason) {
  const std::lock_guard lock(state_mutex_);
  const bool was_ready = ReadyLocked();
  const bool file_was = certificate_.ok && injected_.ok;
  for (ReadinessCheck* check : {&injected_, &callable_}) {
    *check = {check->name, false, reason, true};
  }
  FollowReadyFileLocked(file_was);
  PublishReadiness(was_ready);
}

void Sidecar::FollowReadyFileLocked(bool file_was) {
  // The ready file tells the webhook its certificate is there and trusted, so it follows
  // these two checks alone: a webhook that waits for it cannot pass the serving check
  // before it starts. Written before /readyz can say ready, never after.
  const bool file_ready = certificate_.ok && injected_.ok;
  if (config_.ready_file.empty() || file_ready == file_was) {
    return;
  }
  std::error_code error;
  if (file_ready) {
    std::ofstream(config_.ready_file) << "ready\n";
  } else {
    std::filesystem::remove(config_.ready_file, error);
  }
}

void Sidecar::SetCallableReadiness(const std::vector<Finding>& findings, Role role) {
  std::map<FindingCode, int> counts{{FindingCode::kTargetNameNotCovered, 0},
                                    {FindingCode::kTargetInvalid, 0}};
  for (const Finding& finding : findings) {
    ++counts[finding.code];
  }
  for (const auto& [code, count] : counts) {
    metrics_.call_findings.Set({std::string(FindingCodeName(code))}, count);
  }
  {
    const std::lock_guard lock(state_mutex_);
    const bool was_ready = ReadyLocked();
    const std::string reason = JoinFindings(findings);
    if (!findings.empty() && reason != callable_.reason) {
      log_(LogLevel::kWarning, "the API server cannot call every target: " + reason);
    }
    callable_.ok = findings.empty();
    callable_.unknown = false;
    callable_.reason = reason;
    PublishReadiness(was_ready);
  }
  // One Warning Event per distinct finding, not one per pass; a finding that clears and
  // comes back is told again.
  std::set<std::string> current;
  std::vector<kube::Json> events;
  const auto& secret = config_.pass.secret;
  for (const Finding& finding : findings) {
    const std::string key = finding.object + ": " + finding.message;
    current.insert(key);
    if (role == Role::kLeader && !warned_calls_.contains(key)) {
      events.push_back(MakeEvent({"v1", "Secret", secret.ns, secret.name, ""},
                                 finding.code == FindingCode::kTargetNameNotCovered
                                     ? "TargetNameNotCovered"
                                     : "TargetInvalid",
                                 key, config_.instance, clock_.Now(), EventType::kWarning));
    }
  }
  warned_calls_ = role == Role::kLeader ? std::move(current) : std::set<std::string>();
  for (const kube::Json& event : events) {
    if (auto recorded = RecordEvent(client_, event); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
}

void Sidecar::PublishReadiness(bool was_ready) {
  const bool ready = ReadyLocked();
  metrics_.ready.Set({}, ready ? 1 : 0);
  if (ready == was_ready) {
    return;
  }
  if (ready) {
    log_(LogLevel::kInfo, "ready");
  } else {
    const ReadinessCheck& failing = !certificate_.ok ? certificate_
                                    : !injected_.ok  ? injected_
                                    : !callable_.ok  ? callable_
                                                     : *serving_;
    log_(LogLevel::kInfo,
         "not ready: " + (failing.name == "certificate" ? std::string() : failing.name + ": ") +
             failing.reason);
  }
}

}  // namespace certctl::loop
