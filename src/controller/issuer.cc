#include "certctl/controller/issuer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "certctl/controller/rotation.h"
#include "certctl/util/duration.h"
#include "certctl/util/finding.h"
#include "certctl/util/text.h"

namespace certctl::controller {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kRunPrefix = "certctl run ";

// The annotation's string value; nothing when absent, null or not a string (an annotation
// this module does not understand is no record).
std::optional<std::string> Annotation(const Json& secret, const char* key) {
  auto value = SecretAnnotation(secret, "secret", key);
  return value ? *value : std::nullopt;
}

Json& Annotations(Json& secret) {
  Json& annotations = secret["metadata"]["annotations"];
  if (!annotations.is_object()) {
    annotations = Json::object();
  }
  return annotations;
}

std::optional<RecordedInstance> Recorded(const Json& secret, const char* by, const char* started,
                                         const char* with) {
  auto name = Annotation(secret, by);
  if (!name || name->empty()) {
    return std::nullopt;
  }
  RecordedInstance recorded;
  recorded.name = std::move(*name);
  if (started != nullptr) {
    if (auto text = Annotation(secret, started); text) {
      if (auto time = ParseRfc3339(*text); time) {
        recorded.started = *time;
      }
    }
  }
  recorded.settings = ParseSettings(Annotation(secret, with).value_or(""));
  return recorded;
}

// To the millisecond: instances that start in the same second (a test, a scale-up) still
// tell which came later without falling back on their names.
TimePoint ToMilliseconds(TimePoint time) {
  return std::chrono::floor<std::chrono::milliseconds>(time);
}

std::string FormatStarted(TimePoint time) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(time);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(ToMilliseconds(time) - seconds).count();
  std::string text = FormatRfc3339(seconds);
  text.pop_back();  // the "Z"
  const std::string fraction = std::to_string(1000 + millis).substr(1);
  return text + "." + fraction + "Z";
}

std::string Described(const RecordedInstance& instance) {
  return instance.started ? instance.name + " (started " + FormatRfc3339(*instance.started) + ")"
                          : instance.name;
}

// A value may hold what separates entries (an organization "Acme, Inc."): those characters
// are percent-encoded.
std::string Escaped(const std::string& value) {
  std::string text;
  for (const char c : value) {
    if (c == '%' || c == ',' || c == '=') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const auto byte = static_cast<unsigned char>(c);
      text += '%';
      text += kHex[byte >> 4U];
      text += kHex[byte & 0xFU];
    } else {
      text += c;
    }
  }
  return text;
}

std::string Unescaped(std::string_view text) {
  std::string value;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const std::string hex(text.substr(i + 1, 2));
      char* end = nullptr;
      const long byte = std::strtol(hex.c_str(), &end, 16);
      if (end == hex.c_str() + 2) {
        value += static_cast<char>(byte);
        i += 2;
        continue;
      }
    }
    value += text[i];
  }
  return value;
}

}  // namespace

std::string FormatSettings(const IssuerSettings& settings) {
  std::string text;
  for (const auto& [key, value] : settings) {
    text += (text.empty() ? "" : ",") + Escaped(key) + "=" + Escaped(value);
  }
  return text;
}

IssuerSettings ParseSettings(std::string_view text) {
  IssuerSettings settings;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    if (const std::size_t equals = entry.find('='); equals != std::string_view::npos) {
      settings.emplace_back(Unescaped(entry.substr(0, equals)),
                            Unescaped(entry.substr(equals + 1)));
    }
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return settings;
}

std::string Issuer::Name() const { return "certctl " + command + " " + identity; }

std::optional<RecordedInstance> RecordedIssuer(const Json& secret) {
  return Recorded(secret, kIssuedByAnnotation, kIssuerStartedAnnotation, kIssuedWithAnnotation);
}

std::optional<RecordedInstance> RecordedObjection(const Json& secret) {
  return Recorded(secret, kObjectedByAnnotation, nullptr, kObjectedWithAnnotation);
}

void RecordIssuer(Json& secret, const Issuer& issuer) {
  Json& annotations = Annotations(secret);
  annotations[kIssuedByAnnotation] = issuer.Name();
  annotations[kIssuerStartedAnnotation] = FormatStarted(issuer.started);
  annotations[kIssuedWithAnnotation] = FormatSettings(issuer.settings);
  if (auto objection = RecordedObjection(secret);
      objection && (objection->name == issuer.Name() || objection->settings == issuer.settings)) {
    annotations.erase(kObjectedByAnnotation);
    annotations.erase(kObjectedWithAnnotation);
  }
}

void RecordObjection(Json& secret, const Issuer& issuer) {
  Json& annotations = Annotations(secret);
  annotations[kObjectedByAnnotation] = issuer.Name();
  annotations[kObjectedWithAnnotation] = FormatSettings(issuer.settings);
}

bool DropObjection(Json& secret, const Issuer& issuer) {
  auto objection = RecordedObjection(secret);
  if (!objection || objection->name != issuer.Name()) {
    return false;
  }
  Json& annotations = Annotations(secret);
  annotations.erase(kObjectedByAnnotation);
  annotations.erase(kObjectedWithAnnotation);
  return true;
}

bool YieldsTo(const Issuer& self, const RecordedInstance& issuer) {
  const std::string own = self.Name();
  if (self.command != "run" || !issuer.name.starts_with(kRunPrefix) || issuer.name == own ||
      !issuer.started || issuer.settings == self.settings) {
    return false;
  }
  // Compared as recorded: two instances started close together must not each find the
  // other the later one.
  const TimePoint started = ToMilliseconds(self.started);
  return *issuer.started > started || (*issuer.started == started && issuer.name > own);
}

bool LacksOnlyNames(const pki::ValidationReport& validation) {
  const std::vector<Finding> findings = validation.AllFindings();
  return !findings.empty() && std::all_of(findings.begin(), findings.end(), [](const Finding& f) {
    return f.code == FindingCode::kSanMissing;
  });
}

std::vector<std::string> DifferingSettings(const IssuerSettings& own, const IssuerSettings& other,
                                           std::string_view own_label) {
  const auto value_in = [](const IssuerSettings& settings, const std::string& key) {
    const auto found = std::find_if(settings.begin(), settings.end(),
                                    [&](const auto& entry) { return entry.first == key; });
    return found == settings.end() ? std::string("default") : found->second;
  };
  std::vector<std::string> keys;
  for (const IssuerSettings* settings : {&other, &own}) {
    for (const auto& entry : *settings) {
      if (std::find(keys.begin(), keys.end(), entry.first) == keys.end()) {
        keys.push_back(entry.first);
      }
    }
  }
  std::vector<std::string> differing;
  for (const std::string& key : keys) {
    const std::string theirs = value_in(other, key);
    const std::string mine = value_in(own, key);
    if (theirs != mine) {
      differing.push_back(key + " " + theirs + " (" + std::string(own_label) + ": " + mine + ")");
    }
  }
  return differing;
}

std::string ConfigurationConflict::Describe(const std::string& object) const {
  const std::string what = differing.empty() ? "other settings" : JoinWithCommas(differing);
  if (yielding) {
    return object + " was issued by " + other + ", which runs with other settings: " + what +
           "; this instance started earlier, so it leaves that certificate as it is and serves "
           "it. Give both the same settings or a Secret each; if " +
           other + " no longer runs, `certctl rotate` makes this instance issue again";
  }
  return other + " also manages " + object + ", with other settings: " + what +
         "; it started earlier and leaves this instance's certificate as it is. Give both the "
         "same settings or a Secret each";
}

ConfigurationConflict YieldingConflict(const Issuer& self, const RecordedInstance& issuer) {
  return ConfigurationConflict{.other = Described(issuer),
                               .differing = DifferingSettings(self.settings, issuer.settings),
                               .yielding = true};
}

std::optional<ConfigurationConflict> ObjectedConflict(const Issuer& self, const Json& secret) {
  auto objection = RecordedObjection(secret);
  auto issuer = RecordedIssuer(secret);
  if (!objection || objection->name == self.Name() || objection->settings == self.settings ||
      !issuer || issuer->settings != self.settings) {
    return std::nullopt;
  }
  return ConfigurationConflict{.other = Described(*objection),
                               .differing = DifferingSettings(self.settings, objection->settings),
                               .yielding = false};
}

std::optional<std::string> RecordedConflict(const Json& secret) {
  auto objection = RecordedObjection(secret);
  auto issuer = RecordedIssuer(secret);
  if (!objection || !issuer || objection->settings == issuer->settings) {
    return std::nullopt;
  }
  return Described(*issuer) + " issued the certificate with " +
         JoinWithCommas(DifferingSettings(objection->settings, issuer->settings, objection->name)) +
         "; " + objection->name +
         " manages the same Secret with those settings and leaves the certificate as it is. "
         "Give both the same settings or a Secret each";
}

Status StepAside(kube::Client& client, std::string_view ns, std::string_view name,
                 const Issuer& self) {
  const std::string object = "secret/" + std::string(ns) + "/" + std::string(name);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto current = client.Get(kube::kSecrets, ns, name);
    if (!current) {
      return Fail(current.error().Wrap("get " + object));
    }
    if (!current->has_value()) {
      return {};
    }
    Json secret = std::move(**current);
    bool changed = DropObjection(secret, self);
    const auto issuer = RecordedIssuer(secret);
    if (!changed && issuer && issuer->name == self.Name() && RecordedObjection(secret)) {
      Json& annotations = Annotations(secret);
      for (const char* key :
           {kIssuedByAnnotation, kIssuerStartedAnnotation, kIssuedWithAnnotation}) {
        annotations.erase(key);
      }
      changed = true;
    }
    if (!changed) {
      return {};
    }
    auto updated = client.Update(kube::kSecrets, ns, name, secret);
    if (updated) {
      return {};
    }
    if (updated.error().code() != ErrorCode::kConflict) {
      return Fail(updated.error().Wrap("update " + object));
    }
  }
  return Fail(ErrorCode::kConflict, object + " kept changing under us");
}

}  // namespace certctl::controller
