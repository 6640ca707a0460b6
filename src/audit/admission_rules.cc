#include "audit/admission_rules.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace certctl::audit::internal {
namespace {

constexpr std::string_view kNameLabel = "kubernetes.io/metadata.name";
constexpr const char* kOperations[] = {"CREATE", "UPDATE", "DELETE", "CONNECT"};
// A finding lists this many requests, and this many webhooks, before it says how many more.
constexpr std::size_t kShown = 3;

// The strings of an array field; anything else reads as empty, as the API server would not
// have stored it.
std::vector<std::string> Strings(const kube::Json& object, std::string_view key) {
  std::vector<std::string> values;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_array()) {
    return values;
  }
  for (const kube::Json& value : *it) {
    if (value.is_string()) {
      values.push_back(value.get<std::string>());
    }
  }
  return values;
}

// A string field; absent or of another type reads as `fallback`.
std::string StringField(const kube::Json& object, std::string_view key, std::string fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::move(fallback);
}

bool Has(const std::vector<std::string>& values, std::string_view value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

bool NonEmptyObject(const kube::Json& webhook, std::string_view key) {
  const auto it = webhook.find(key);
  return it != webhook.end() && it->is_object() && !it->empty();
}

// Whether a namespaceSelector certainly matches namespace `ns`, knowing only its name label:
// a requirement on any other label might exclude it.
bool SelectsNamespace(const kube::Json& webhook, std::string_view ns) {
  const auto selector = webhook.find("namespaceSelector");
  if (selector == webhook.end() || !selector->is_object()) {
    return true;
  }
  if (const auto labels = selector->find("matchLabels");
      labels != selector->end() && labels->is_object()) {
    for (const auto& [key, value] : labels->items()) {
      if (key != kNameLabel || !value.is_string() || value.get<std::string>() != ns) {
        return false;
      }
    }
  }
  if (const auto expressions = selector->find("matchExpressions");
      expressions != selector->end() && expressions->is_array()) {
    for (const kube::Json& expression : *expressions) {
      if (!expression.is_object() || StringField(expression, "key", "") != kNameLabel) {
        return false;
      }
      const std::string op = StringField(expression, "operator", "");
      const bool listed = Has(Strings(expression, "values"), ns);
      const bool matches = op == "In" ? listed : op == "NotIn" ? !listed : op == "Exists";
      if (!matches) {
        return false;
      }
    }
  }
  return true;
}

struct Request {
  std::string operation;
  std::string group;     // "*": every group
  std::string resource;  // "*": every resource

  auto operator<=>(const Request&) const = default;
};

bool Matches(const RuleSet& rule, const Request& request) {
  const bool operation = Has(rule.operations, "*") || Has(rule.operations, request.operation);
  const bool group = Has(rule.groups, "*") || Has(rule.groups, request.group);
  const bool resource = Has(rule.resources, "*") || Has(rule.resources, "*/*") ||
                        Has(rule.resources, request.resource);
  return operation && group && resource;
}

std::string Describe(const Request& request) {
  if (request.resource == "*") {
    return request.operation +
           (request.group == "*" ? " of any resource" : " of any resource in " + request.group);
  }
  const std::string group =
      request.group.empty() || request.group == "*" ? "" : request.group + "/";
  return request.operation + " " + group + request.resource;
}

std::string Listed(const std::vector<std::string>& items) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < kShown; ++i) {
    text += (i == 0 ? "" : ", ") + items[i];
  }
  if (items.size() > kShown) {
    text += " and " + std::to_string(items.size() - kShown) + " more";
  }
  return text;
}

}  // namespace

std::vector<RuleSet> ReadRules(const kube::Json& webhook) {
  std::vector<RuleSet> rules;
  const auto it = webhook.find("rules");
  if (it == webhook.end() || !it->is_array()) {
    return rules;
  }
  for (const kube::Json& rule : *it) {
    if (rule.is_object()) {
      rules.push_back(
          {Strings(rule, "operations"), Strings(rule, "apiGroups"), Strings(rule, "resources")});
    }
  }
  return rules;
}

bool InterceptsPodCreation(const kube::Json& webhook, std::string_view ns) {
  if (NonEmptyObject(webhook, "objectSelector")) {
    return false;
  }
  if (const auto conditions = webhook.find("matchConditions");
      conditions != webhook.end() && conditions->is_array() && !conditions->empty()) {
    return false;
  }
  if (!SelectsNamespace(webhook, ns)) {
    return false;
  }
  const auto rules = webhook.find("rules");
  if (rules == webhook.end() || !rules->is_array()) {
    return false;
  }
  return std::any_of(rules->begin(), rules->end(), [](const kube::Json& rule) {
    if (!rule.is_object()) {
      return false;
    }
    const std::vector<std::string> versions = Strings(rule, "apiVersions");
    const std::string scope = StringField(rule, "scope", "*");
    return Matches({Strings(rule, "operations"), Strings(rule, "apiGroups"),
                    Strings(rule, "resources")},
                   {"CREATE", "", "pods"}) &&
           (Has(versions, "*") || Has(versions, "v1")) && (scope == "*" || scope == "Namespaced");
  });
}

std::vector<AuditFinding> TimeoutsAddUp(const std::vector<AdmissionHook>& hooks) {
  // Every request some rule names, wildcards kept as "every".
  std::set<Request> requests;
  for (const AdmissionHook& hook : hooks) {
    for (const RuleSet& rule : hook.rules) {
      for (const std::string& operation : rule.operations) {
        for (const std::string& group : rule.groups) {
          for (const std::string& resource : rule.resources) {
            const std::string named = resource == "*/*" ? "*" : resource;
            if (operation == "*") {
              for (const char* each : kOperations) {
                requests.insert({each, group, named});
              }
            } else {
              requests.insert({operation, group, named});
            }
          }
        }
      }
    }
  }
  // The requests that wait too long, by the webhooks they wait on.
  std::map<std::vector<std::size_t>, std::vector<Request>> too_long;
  for (const Request& request : requests) {
    std::vector<std::size_t> matched;
    int mutating = 0;
    int validating = 0;
    for (std::size_t i = 0; i < hooks.size(); ++i) {
      const auto& rules = hooks[i].rules;
      if (std::any_of(rules.begin(), rules.end(),
                      [&](const RuleSet& rule) { return Matches(rule, request); })) {
        matched.push_back(i);
        if (hooks[i].mutating) {
          mutating += hooks[i].timeout_seconds;
        } else {
          validating = std::max(validating, hooks[i].timeout_seconds);
        }
      }
    }
    if (mutating + validating > kTimeoutBudgetSeconds) {
      too_long[matched].push_back(request);
    }
  }
  std::vector<AuditFinding> findings;
  for (const auto& [matched, waiting] : too_long) {
    int mutating = 0;
    int validating = 0;
    std::vector<std::string> mutating_hooks;
    std::string longest;
    for (std::size_t i : matched) {
      const AdmissionHook& hook = hooks[i];
      const std::string named =
          hook.object + " " + hook.entry + " (" + std::to_string(hook.timeout_seconds) + " s)";
      if (hook.mutating) {
        mutating += hook.timeout_seconds;
        mutating_hooks.push_back(named);
      } else if (hook.timeout_seconds > validating) {
        validating = hook.timeout_seconds;
        longest = named;
      }
    }
    std::vector<std::string> described;
    for (const Request& request : waiting) {
      described.push_back(Describe(request));
    }
    std::string message = "may wait " + std::to_string(mutating + validating) +
                          " s on webhooks, more than " + std::to_string(kTimeoutBudgetSeconds) +
                          " s:";
    if (!mutating_hooks.empty()) {
      message += " " + std::to_string(mutating_hooks.size()) +
                 " mutating, called one after another (" + Listed(mutating_hooks) + ")";
    }
    if (!longest.empty()) {
      message += std::string(mutating_hooks.empty() ? " " : ", then ") +
                 "the longest of the validating ones, called together (" + longest + ")";
    }
    message += "; a webhook that does not answer makes the request time out or wait that long";
    findings.push_back(
        {FindingCode::kTimeoutsAddUp, Severity::kWarning, Listed(described), "", message});
  }
  return findings;
}

}  // namespace certctl::audit::internal
