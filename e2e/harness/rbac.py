"""certctl's RBAC, derived from the chart's permission table
(manifests/helm/certctl/permissions.yaml) the way templates/rbac.yaml derives it, so tests
grant certctl exactly what the chart grants:

    rules = emulator_rules("job", "webhook-server-cert", "infra",
                           {"validatingWebhooks": ["hook"], "crds": ["widgets.hook.io"]})
    rules = emulator_rules("sidecar", "webhook-server-cert", "infra",
                           {"validatingWebhooks": ["hook"]}, sidecar={"leaderElection": True})
    cluster.add_user("system:serviceaccount:infra:certctl", rules)

`targets` has the shape of the chart's `targets` value (validatingWebhooks, mutatingWebhooks,
crds, apiServices: lists of names; webhookSelector: a selector string); keys left out keep
the chart's defaults (none). `sidecar` overrides keys of the chart's `sidecar` value
(replicas, leaderElection, leaseName); the table's value paths are read as the chart
resolves them (certctl.resolvedValues): leaderElection null means replicas > 1, an empty
leaseName means <secretName>-certctl.

Scopes: "namespace" rules go to the Role in the Secret's namespace, "default" rules to the
Role in the namespace default (Events about cluster-scoped objects), "cluster" rules to the
ClusterRole.

`request_name(entry)` is the name a request of the emulator's log is authorized for: a
list or watch pinned by fieldSelector=metadata.name=X counts as a request for X, as the API
server's RequestInfo has it.
"""

import copy
import os
import urllib.parse

import yaml

from .helm import REPO

CHART = os.path.join(REPO, "manifests", "helm", "certctl")
PERMISSIONS = os.path.join(CHART, "permissions.yaml")
SCOPES = ("namespace", "default", "cluster")
DEFAULT_NAMESPACE = "default"  # where certctl records Events about cluster-scoped objects


class Grant:
    """One rule of the table as granted for a Secret and targets: `rule` is the table's
    entry (name, scope, why, verbs with reasons, ...), `policy` the rbac/v1 PolicyRule that
    the chart renders from it (verbs sorted, as the chart renders them)."""

    def __init__(self, rule, policy):
        self.rule = rule
        self.policy = policy

    @property
    def name(self):
        return self.rule["name"]

    @property
    def scope(self):
        return self.rule["scope"]

    def emulator_rule(self, namespace):
        """The policy rule in the emulator's form: namespace-scoped rules are limited to
        `namespace` (the Secret's), "default" rules to the namespace default, as the
        chart's RoleBindings limit them."""
        out = copy.deepcopy(self.policy)
        if self.scope == "namespace":
            out["namespaces"] = [namespace]
        elif self.scope == "default":
            out["namespaces"] = [DEFAULT_NAMESPACE]
        return out


def table_rules(mode):
    """The table's rules for `mode` ("job", "sidecar"), as written (deep copies)."""
    with open(PERMISSIONS, encoding="utf-8") as f:
        table = yaml.safe_load(f)
    return copy.deepcopy(table["modes"][mode]["rules"])


def chart_values(secret_name, targets, sidecar=None, top=None):
    """The chart's default values with `secretName`, `targets`, keys of `sidecar` and the
    top-level keys of `top` (failurePolicyOnceReady, webhook: {service}) set, resolved as the
    chart's certctl.resolvedValues resolves them."""
    with open(os.path.join(CHART, "values.yaml"), encoding="utf-8") as f:
        values = yaml.safe_load(f)
    for key, given, known in (("targets", targets, values["targets"]),
                              ("sidecar", sidecar or {}, values["sidecar"])):
        unknown = set(given) - set(known)
        if unknown:
            raise KeyError(f"not a key of the chart's {key}: {sorted(unknown)}")
    values["secretName"] = secret_name
    values["targets"].update(copy.deepcopy(targets))
    values["sidecar"].update(copy.deepcopy(sidecar or {}))
    for key, value in (top or {}).items():
        if key not in values:
            raise KeyError(f"not a value of the chart: {key}")
        if isinstance(value, dict):
            values[key].update(copy.deepcopy(value))
        else:
            values[key] = value
    resolved = values["sidecar"]
    if resolved.get("leaderElection") is None:
        resolved["leaderElection"] = int(resolved["replicas"]) > 1
    resolved["leaseName"] = resolved.get("leaseName") or f"{secret_name}-certctl"
    return values


def value_at(values, path):
    """The value at a dotted path ("targets.crds"); a path the chart lacks is a KeyError,
    as it fails the chart's render."""
    value = values
    for key in path.split("."):
        value = value[key]
    return value


def grants(mode, secret_name, targets, sidecar=None, top=None):
    """The table's rules of `mode` that the chart grants for this Secret, these targets and
    these sidecar settings, in table order: a rule limited to named objects only when the
    value names some (an empty resourceNames would cover everything), a rule with `when`
    only when that value is set."""
    values = chart_values(secret_name, targets, sidecar, top)
    out = []
    for rule in table_rules(mode):
        if rule.get("when") and not value_at(values, rule["when"]):
            continue
        policy = {"apiGroups": list(rule["apiGroups"]), "resources": list(rule["resources"])}
        if rule.get("resourceNames"):
            names = value_at(values, rule["resourceNames"])
            names = [names] if isinstance(names, str) else list(names or [])
            if not names:
                continue
            policy["resourceNames"] = names
        policy["verbs"] = sorted(rule["verbs"])
        out.append(Grant(rule, policy))
    return out


def policy_rules(mode, secret_name, targets, sidecar=None, top=None):
    """{"namespace": [PolicyRule, ...], "default": [...], "cluster": [...]}: the rules of
    the chart's Role in the Secret's namespace, of its Role in the namespace default, and
    of its ClusterRole."""
    by_scope = {scope: [] for scope in SCOPES}
    for grant in grants(mode, secret_name, targets, sidecar, top):
        by_scope[grant.scope].append(grant.policy)
    return by_scope


def emulator_rules(mode, secret_name, namespace, targets, sidecar=None, top=None):
    """The emulator policy rules (cluster.add_user) that the chart's RBAC amounts to for a
    Secret `secret_name` in `namespace`, these targets and these sidecar settings."""
    return [grant.emulator_rule(namespace)
            for grant in grants(mode, secret_name, targets, sidecar, top)]


def controller_rules(release_namespace, watched=(), lease_name=None, namespace_selector=""):
    """The emulator policy rules (cluster.add_user) that the chart's RBAC amounts to in mode
    controller, released in `release_namespace` and watching the namespaces `watched` (none:
    every namespace, or those `namespace_selector` selects), with the Lease `lease_name`
    (default: the chart's)."""
    with open(os.path.join(CHART, "values.yaml"), encoding="utf-8") as f:
        values = yaml.safe_load(f)
    if lease_name:
        values["controller"]["leaseName"] = lease_name
    values["controller"]["namespaceSelector"] = namespace_selector
    out = []
    for rule in table_rules("controller"):
        if rule.get("when") and not value_at(values, rule["when"]):
            continue
        policy = {"apiGroups": list(rule["apiGroups"]), "resources": list(rule["resources"]),
                  "verbs": sorted(rule["verbs"])}
        if rule.get("resourceNames"):
            policy["resourceNames"] = [value_at(values, rule["resourceNames"])]
        scope = rule["scope"]
        if scope == "release":
            policy["namespaces"] = [release_namespace]
        elif scope == "watched" and watched:
            policy["namespaces"] = list(watched)
        elif scope == "default":
            # Rendered only when the watched namespaces leave default out.
            if not watched or DEFAULT_NAMESPACE in watched:
                continue
            policy["namespaces"] = [DEFAULT_NAMESPACE]
        out.append(policy)
    return out


def request_name(entry):
    """The object name a request of the emulator's log (cluster.request_log()) was
    authorized for: its own name, or for a list or watch without one, the name that
    fieldSelector=metadata.name=X (or ==X) pins, as the API server's RequestInfo takes it."""
    if entry["name"] or entry["verb"] not in ("list", "watch"):
        return entry["name"]
    query = urllib.parse.parse_qs(entry.get("query") or "")
    for selector in query.get("fieldSelector", []):
        for term in selector.split(","):
            field, op, value = term.partition("==") if "==" in term else term.partition("=")
            if op and not field.endswith("!") and field.strip() == "metadata.name":
                return value.strip()
    return ""
