#include "certctl/leader/elector.h"

#include <array>
#include <ctime>

#include "certctl/kube/object.h"

namespace certctl::leader {

std::string FormatMicroTime(TimePoint time) {
  const auto micros = std::chrono::floor<std::chrono::microseconds>(time);
  const auto seconds = std::chrono::floor<std::chrono::seconds>(micros);
  const std::time_t whole = std::chrono::system_clock::to_time_t(seconds);
  std::tm utc{};
  ::gmtime_r(&whole, &utc);
  std::array<char, 40> text{};
  const std::size_t length = std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%S", &utc);
  std::string fraction = std::to_string((micros - seconds).count());
  fraction.insert(0, 6 - fraction.size(), '0');  // always 0 to 999999: six digits
  return std::string(text.data(), length) + "." + fraction + "Z";
}

Elector::Elector(kube::Client& client, const Clock& clock, ElectionConfig config)
    : client_(client),
      clock_(clock),
      config_(std::move(config)),
      what_("lease/" + config_.ns + "/" + config_.name) {}

bool Elector::IsLeader() const {
  return holding_ && clock_.Monotonic() - last_renewal_ < config_.renew_deadline;
}

std::chrono::milliseconds Elector::NextAttemptIn() {
  const std::chrono::milliseconds period = config_.retry_period;
  if (IsLeader()) {
    return period;
  }
  std::uniform_real_distribution<double> spread(0.0, kCandidateJitter);
  return period + std::chrono::milliseconds(static_cast<std::int64_t>(
                      spread(jitter_) * static_cast<double>(period.count())));
}

void Elector::Observe(const kube::Json& lease, const std::string& holder) {
  const kube::Json spec = lease.value("spec", kube::Json::object());
  std::string record = spec.dump();
  if (record != observed_record_) {
    observed_record_ = std::move(record);
    observed_time_ = clock_.Monotonic();
  }
  observed_holder_ = holder;
  observed_ = lease;
}

Result<bool> Elector::TryAcquireOrRenew() {
  auto outcome = TryAcquireOrRenewOnce();
  if (outcome && *outcome) {
    holding_ = true;
    last_renewal_ = clock_.Monotonic();
  } else if (outcome) {
    holding_ = false;
  } else if (holding_ && clock_.Monotonic() - last_renewal_ >= config_.renew_deadline) {
    holding_ = false;
  }
  return outcome;
}

Result<bool> Elector::TryAcquireOrRenewOnce() {
  const std::string now = FormatMicroTime(clock_.Now());
  auto current = client_.Get(kube::kLeases, config_.ns, config_.name);
  if (!current) {
    return Fail(current.error());
  }
  if (!*current) {
    kube::Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                        {"kind", "Lease"},
                        {"metadata", {{"name", config_.name}, {"namespace", config_.ns}}},
                        {"spec",
                         {{"holderIdentity", config_.identity},
                          {"leaseDurationSeconds", config_.lease_duration.count()},
                          {"acquireTime", now},
                          {"renewTime", now},
                          {"leaseTransitions", 0}}}};
    auto created = client_.Create(kube::kLeases, config_.ns, lease);
    if (!created) {
      // Another candidate created it first: it leads; the next attempt reads its record.
      if (created.error().code() == ErrorCode::kAlreadyExists) {
        return false;
      }
      return Fail(created.error());
    }
    Observe(*created, config_.identity);
    return true;
  }

  const kube::Json& lease = **current;
  auto spec = kube::OptionalObject(lease, "/spec", what_);
  auto holder = kube::OptionalString(lease, "/spec/holderIdentity", what_);
  auto duration = kube::OptionalInteger(lease, "/spec/leaseDurationSeconds", what_);
  auto transitions = kube::OptionalInteger(lease, "/spec/leaseTransitions", what_);
  for (const Error* error :
       {spec ? nullptr : &spec.error(), holder ? nullptr : &holder.error(),
        duration ? nullptr : &duration.error(), transitions ? nullptr : &transitions.error()}) {
    if (error != nullptr) {
      return Fail(*error);
    }
  }
  const std::string holder_identity = holder->value_or("");
  Observe(lease, holder_identity);

  const bool ours = holder_identity == config_.identity;
  if (!ours && !holder_identity.empty()) {
    const auto lease_duration =
        std::chrono::seconds(duration->value_or(config_.lease_duration.count()));
    if (clock_.Monotonic() < SaturatingAdd(observed_time_, lease_duration)) {
      return false;  // held, and renewed within the lease duration as far as we can see
    }
  }

  kube::Json updated = lease;
  kube::Json& updated_spec = updated["spec"];
  if (!updated_spec.is_object()) {
    updated_spec = kube::Json::object();
  }
  updated_spec["holderIdentity"] = config_.identity;
  updated_spec["leaseDurationSeconds"] = config_.lease_duration.count();
  updated_spec["renewTime"] = now;
  if (!ours) {
    updated_spec["acquireTime"] = now;
    updated_spec["leaseTransitions"] = transitions->value_or(0) + 1;
  }
  // Conditional on the resourceVersion read: of two candidates only one can win.
  auto written = client_.Update(kube::kLeases, config_.ns, config_.name, updated);
  if (!written) {
    if (written.error().code() == ErrorCode::kConflict) {
      return false;
    }
    return Fail(written.error());
  }
  Observe(*written, config_.identity);
  return true;
}

Status Elector::Release() {
  if (!holding_) {
    return {};
  }
  holding_ = false;
  auto current = client_.Get(kube::kLeases, config_.ns, config_.name);
  if (!current) {
    return Fail(current.error());
  }
  if (!*current) {
    return {};
  }
  auto holder = kube::OptionalString(**current, "/spec/holderIdentity", what_);
  if (!holder) {
    return Fail(holder.error());
  }
  if (holder->value_or("") != config_.identity) {
    return {};  // someone took over already
  }
  kube::Json released = **current;
  const std::string now = FormatMicroTime(clock_.Now());
  kube::Json& spec = released["spec"];
  spec.erase("holderIdentity");
  spec["leaseDurationSeconds"] = 1;
  spec["acquireTime"] = now;
  spec["renewTime"] = now;
  auto written = client_.Update(kube::kLeases, config_.ns, config_.name, released);
  if (!written) {
    return Fail(written.error());
  }
  return {};
}

}  // namespace certctl::leader
