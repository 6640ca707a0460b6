"""certctl's RBAC, derived from the chart's permission table
(manifests/helm/certctl/permissions.yaml) the way templates/rbac.yaml derives it, so tests
grant certctl exactly what the chart grants:

    rules = emulator_rules("job", "webhook-server-cert", "infra",
                           {"validatingWebhooks": ["hook"], "crds": ["widgets.hook.io"]})
    cluster.add_user("system:serviceaccount:infra:certctl", rules)

`targets` has the shape of the chart's `targets` value (validatingWebhooks, mutatingWebhooks,
crds, apiServices: lists of names; webhookSelector: a selector string); keys left out keep
the chart's defaults (none).
"""

import copy
import os

import yaml

from .helm import REPO

CHART = os.path.join(REPO, "manifests", "helm", "certctl")
PERMISSIONS = os.path.join(CHART, "permissions.yaml")
SCOPES = ("namespace", "cluster")


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
        `namespace` (the Secret's), as the chart's RoleBinding limits them."""
        out = copy.deepcopy(self.policy)
        if self.scope == "namespace":
            out["namespaces"] = [namespace]
        return out


def table_rules(mode):
    """The table's rules for `mode` ("job"), as written (deep copies)."""
    with open(PERMISSIONS, encoding="utf-8") as f:
        table = yaml.safe_load(f)
    return copy.deepcopy(table["modes"][mode]["rules"])


def chart_values(secret_name, targets):
    """The chart's default values with `secretName` and `targets` set."""
    with open(os.path.join(CHART, "values.yaml"), encoding="utf-8") as f:
        values = yaml.safe_load(f)
    unknown = set(targets) - set(values["targets"])
    if unknown:
        raise KeyError(f"not a key of the chart's targets: {sorted(unknown)}")
    values["secretName"] = secret_name
    values["targets"].update(copy.deepcopy(targets))
    return values


def value_at(values, path):
    """The value at a dotted path ("targets.crds"); a path the chart lacks is a KeyError,
    as it fails the chart's render."""
    value = values
    for key in path.split("."):
        value = value[key]
    return value


def grants(mode, secret_name, targets):
    """The table's rules of `mode` that the chart grants for this Secret and these targets,
    in table order: a rule limited to named objects only when the value names some (an
    empty resourceNames would cover everything), a rule with `when` only when that value
    is set."""
    values = chart_values(secret_name, targets)
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


def policy_rules(mode, secret_name, targets):
    """{"namespace": [PolicyRule, ...], "cluster": [...]}: the rules of the chart's Role
    (in the Secret's namespace) and of its ClusterRole."""
    by_scope = {scope: [] for scope in SCOPES}
    for grant in grants(mode, secret_name, targets):
        by_scope[grant.scope].append(grant.policy)
    return by_scope


def emulator_rules(mode, secret_name, namespace, targets):
    """The emulator policy rules (cluster.add_user) that the chart's RBAC amounts to for a
    Secret `secret_name` in `namespace` and these targets."""
    return [grant.emulator_rule(namespace) for grant in grants(mode, secret_name, targets)]
