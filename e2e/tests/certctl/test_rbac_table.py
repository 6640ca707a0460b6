"""Granted == used: the chart's permission table (manifests/helm/certctl/permissions.yaml)
against the requests `certctl job` really sends.

Each scenario runs the job against a fresh emulator as a user that holds exactly what the
table grants for the scenario's Secret and targets (harness/rbac.py). The request log then
shows what the code used: every request must be granted, and every (rule, verb, resource)
of the table must be the one grant that lets some request through, so the table grants
nothing that no code path needs. Taking any single verb away must break the scenario that
needs it. Last, the chart's rendered RBAC and the kustomize example must say what the table
says.
"""

import json
import os
import subprocess
import threading
import time

import pytest
import yaml

from harness import Cluster
from harness.certctl import api_service, crd, run_certctl, webhook_configuration
from harness.helm import REPO, find_helm, helm_env
from harness.rbac import CHART, SCOPES, grants, policy_rules, table_rules
from kubeemu.auth import rule_allows

MODE = "job"
NS = "infra"
SECRET = "webhook-server-cert"
USER = f"system:serviceaccount:{NS}:certctl"
VWC = "ValidatingWebhookConfiguration"
MWC = "MutatingWebhookConfiguration"
SELECTOR = "example.com/ca-bundle=certctl"
EXAMPLES = os.path.join(REPO, "manifests", "examples")
KUBECTL = "/usr/bin/kubectl"

# A target of each kind, by name; chart `targets` form.
NAMED = {"validatingWebhooks": ["hook"], "mutatingWebhooks": ["hook"],
         "crds": ["widgets.hook.io"], "apiServices": ["v1.metrics.hook.io"]}
BY_SELECTOR = {"webhookSelector": SELECTOR}
TARGET_FLAGS = {"validatingWebhooks": "--validating-webhook",
                "mutatingWebhooks": "--mutating-webhook", "crds": "--crd",
                "apiServices": "--apiservice", "webhookSelector": "--webhook-selector"}


def target_flags(targets):
    flags = []
    for key, flag in TARGET_FLAGS.items():
        values = targets.get(key) or []
        for value in [values] if isinstance(values, str) else values:
            flags += [flag, value]
    return flags


def target_objects(targets):
    """Every object the targets name or select, with empty caBundles."""
    objects = [webhook_configuration(VWC, name, ["a.hook.io", "b.hook.io"])
               for name in targets.get("validatingWebhooks", [])]
    objects += [webhook_configuration(MWC, name, ["m.hook.io"])
                for name in targets.get("mutatingWebhooks", [])]
    objects += [crd(name) for name in targets.get("crds", [])]
    objects += [api_service(name.split(".", 1)[1], version=name.split(".", 1)[0])
                for name in targets.get("apiServices", [])]
    if targets.get("webhookSelector"):
        key, value = targets["webhookSelector"].split("=")
        objects += [webhook_configuration(VWC, "labelled", ["s1.hook.io", "s2.hook.io"],
                                          labels={key: value}),
                    webhook_configuration(MWC, "labelled", ["s3.hook.io"],
                                          labels={key: value})]
    return objects


class Bed:
    """One scenario's emulator: the namespace, the targets' objects, and `job()` running
    certctl in a pod as USER holding `rules`. Every run's result is kept in `results`."""

    def __init__(self, cluster, binary, targets, rules):
        self.cluster = cluster
        self.binary = binary
        self.targets = targets
        self.results = []
        cluster.kubectl("create", "namespace", NS)
        for obj in target_objects(targets):
            self.apply(obj)
        cluster.add_user(USER, rules)

    def apply(self, obj):
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def job(self, *args, phase="all", service="hook"):
        env = self.cluster.in_cluster_env(USER, NS)
        result = run_certctl(self.binary, "job", "--phase", phase, "--service", service,
                             *target_flags(self.targets), *args, env=env)
        self.results.append(result)
        return result

    def blank_bundle(self, kind, name, index):
        self.cluster.kubectl("patch", kind, name, "--type", "json", "-p", json.dumps(
            [{"op": "replace", "path": f"/webhooks/{index}/clientConfig/caBundle",
              "value": ""}]))


# --- scenarios: each drives one code path of the job from a fresh emulator ------------------


def fresh_install(bed):
    bed.job()  # creates the Secret, injects into a target of each kind


def steady_state(bed):
    bed.job()
    bed.job()  # nothing to do: reads only


def blanked_bundle(bed):
    bed.job()
    bed.blank_bundle("validatingwebhookconfiguration", "hook", 1)
    bed.job()  # patches that one configuration


def secret_update(bed):
    bed.job()
    bed.job(service="renamed")  # the leaf lacks the new names: re-issued, Secret updated


def secret_update_conflict(bed):
    bed.job()
    bed.cluster.inject_fault(method="PUT", path=f"/secrets/{SECRET}$", status=409)
    bed.job(service="renamed")  # reads the Secret again, then updates it


def adopt(bed):
    generated = run_certctl(bed.binary, "generate", "--service", "hook", "-n", NS, "-o",
                            "secret-json", "--log-level", "off")
    assert generated.returncode == 0, generated.stderr
    external = json.loads(generated.stdout)
    del external["metadata"]["labels"]  # without certctl's label the Secret is external
    bed.apply(external)
    bed.job("--adopt")  # labels it: an update of the whole Secret


def target_patch_conflict(bed):
    bed.job()
    bed.blank_bundle("validatingwebhookconfiguration", "hook", 0)
    bed.cluster.inject_fault(method="PATCH", path="/validatingwebhookconfigurations/hook$",
                             status=409)
    bed.job()  # reads the configuration again, then patches it


def phases_with_a_late_target(bed):
    """The Helm hooks' order: the secret phase, then the inject phase, which reads the
    Secret and waits for a target that the webhook's own chart creates later."""
    late = next(obj for obj in target_objects(bed.targets) if obj["kind"] == MWC)
    bed.cluster.kubectl("delete", "mutatingwebhookconfiguration", late["metadata"]["name"])
    bed.job(phase="secret")
    inject = threading.Thread(target=bed.job, args=("--wait-for-targets", "30s"),
                              kwargs={"phase": "inject"})
    inject.start()
    try:
        deadline = time.monotonic() + 20
        while not any(e["user"] == USER and e["resource"] == "mutatingwebhookconfigurations"
                      and e["code"] == 404 for e in bed.cluster.request_log()["requests"]):
            assert time.monotonic() < deadline, "the inject phase never looked for the target"
            time.sleep(0.1)
        bed.apply(late)
    finally:
        inject.join()


def selector(bed):
    # A conflict on one match of each kind: the job reads it again by name.
    for resource in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        bed.cluster.inject_fault(method="PATCH", path=f"/{resource}/labelled$", status=409)
    bed.job()


class Scenario:
    """A code path: `run` drives it, `outcome` is what the last job run logs when the path
    was taken, and `needs` are the (table rule, verb) pairs this scenario is the designated
    proof for: taking one of them away must make it fail."""

    def __init__(self, run, targets, outcome, needs=()):
        self.name = run.__name__.replace("_", "-")
        self.run = run
        self.targets = targets
        self.outcome = outcome
        self.needs = set(needs)


SCENARIOS = [
    Scenario(fresh_install, NAMED, "injected the CA bundle into 5 of 5", needs={
        ("secret", "get"), ("secret-create", "create"),
        *((rule, verb) for rule in ("validating-webhooks", "mutating-webhooks", "crds",
                                    "apiservices") for verb in ("get", "patch"))}),
    Scenario(steady_state, NAMED, "already hold the CA bundle"),
    Scenario(blanked_bundle, NAMED, "injected the CA bundle into 1 of 5"),
    Scenario(secret_update, NAMED, "re-issued the server certificate",
             needs={("secret", "update")}),
    Scenario(secret_update_conflict, NAMED, "re-issued the server certificate"),
    Scenario(adopt, NAMED, f"adopted secret/{NS}/{SECRET}"),
    Scenario(target_patch_conflict, NAMED, "injected the CA bundle into 1 of 5"),
    Scenario(phases_with_a_late_target, NAMED, "injected the CA bundle into 5 of 5"),
    Scenario(selector, BY_SELECTOR, "injected the CA bundle into 3 of 3",
             needs={("selected-webhooks", verb) for verb in ("list", "get", "patch")}),
]


def run_scenario(binary, scenario, rules):
    """Runs `scenario` on a fresh emulator as USER holding `rules`; returns the job results,
    USER's requests, and the injected faults no request consumed."""
    with Cluster() as cluster:
        bed = Bed(cluster, binary, scenario.targets, rules)
        scenario.run(bed)
        requests = [e for e in cluster.request_log()["requests"] if e["user"] == USER]
        unconsumed = cluster.api("GET", "/_emulator/faults").json()["faults"]
    return bed.results, requests, unconsumed


def describe(entry):
    where = f"{entry['namespace']}/" if entry["namespace"] else ""
    return f"{entry['verb']} {entry['resource']} {where}{entry['name']} ({entry['code']})"


def test_every_request_is_granted_and_every_grant_is_used(certctl_binary):
    granted = {(rule["name"], verb, resource) for rule in table_rules(MODE)
               for verb in rule["verbs"] for resource in rule["resources"]}
    used = set()
    for scenario in SCENARIOS:
        scenario_grants = grants(MODE, SECRET, scenario.targets)
        rules = [grant.emulator_rule(NS) for grant in scenario_grants]
        results, requests, unconsumed = run_scenario(certctl_binary, scenario, rules)
        for result in results:
            assert result.returncode == 0, f"{scenario.name}: {result.stderr}"
        assert scenario.outcome in results[-1].stderr, f"{scenario.name}: {results[-1].stderr}"
        assert unconsumed == [], f"{scenario.name}: an injected fault was never hit"
        needed = set()
        for entry in requests:
            assert entry["resource"], f"{scenario.name}: non-resource request {entry['path']}"
            assert entry["code"] != 403, f"{scenario.name}: refused: {describe(entry)}"
            allowing = [grant.name for grant, rule in zip(scenario_grants, rules)
                        if rule_allows(rule, entry["verb"], entry["apiGroup"], entry["resource"],
                                       entry["subresource"], entry["namespace"], entry["name"])]
            assert allowing, f"{scenario.name}: not granted by the table: {describe(entry)}"
            # Only the one rule that lets a request through is needed for it.
            if len(allowing) == 1:
                needed.add((allowing[0], entry["verb"], entry["resource"]))
        assert scenario.needs <= {(rule, verb) for rule, verb, _ in needed}, \
            f"{scenario.name}: did not use {scenario.needs} as designed"
        used |= needed
    unused = granted - used
    assert not unused, f"granted, but no code path needs it: {sorted(unused)}"


ABLATIONS = [(scenario, rule, verb) for scenario in SCENARIOS
             for rule, verb in sorted(scenario.needs)]


def test_each_verb_of_the_table_has_a_scenario_to_prove_it_needed():
    granted = {(rule["name"], verb) for rule in table_rules(MODE) for verb in rule["verbs"]}
    designated = [(rule, verb) for _, rule, verb in ABLATIONS]
    assert sorted(designated) == sorted(granted)


@pytest.mark.parametrize("scenario, rule, verb", ABLATIONS,
                         ids=[f"{s.name}:{rule}:{verb}" for s, rule, verb in ABLATIONS])
def test_without_one_verb_the_scenario_needing_it_fails(certctl_binary, scenario, rule, verb):
    rules, resources = [], None
    for grant in grants(MODE, SECRET, scenario.targets):
        emulator_rule = grant.emulator_rule(NS)
        if grant.name == rule:
            resources = set(emulator_rule["resources"])
            emulator_rule["verbs"].remove(verb)
            if not emulator_rule["verbs"]:
                continue
        rules.append(emulator_rule)
    assert resources, f"the scenario's targets do not bring rule {rule}"
    results, requests, _ = run_scenario(certctl_binary, scenario, rules)
    assert any(result.returncode == 1 for result in results), \
        [result.stderr for result in results]
    refused = {(e["verb"], e["resource"]) for e in requests if e["code"] == 403}
    assert refused, "nothing was refused"
    assert {v for v, _ in refused} == {verb} and {r for _, r in refused} <= resources, refused


# --- the table itself, the chart and the example ------------------------------------------


def test_table_rules_are_complete_and_least_privilege():
    rules = table_rules(MODE)
    assert len({rule["name"] for rule in rules}) == len(rules), "rule names are unique"
    for rule in rules:
        assert rule["scope"] in SCOPES, rule
        assert rule["why"].strip(), rule["name"]
        assert rule["verbs"] and all(reason.strip() for reason in rule["verbs"].values()), \
            f"{rule['name']}: every verb says why it is needed"
        for field in ("apiGroups", "resources"):
            assert rule[field] and "*" not in rule[field], rule
        assert not set(rule["verbs"]) & {"*", "delete", "deletecollection"}, rule
        if "secrets" in rule["resources"]:
            assert not set(rule["verbs"]) & {"list", "watch"}, rule
        if not rule.get("resourceNames"):
            # Unnamed: only what cannot be named (create), or behind an explicit switch.
            assert set(rule["verbs"]) == {"create"} or rule.get("when"), rule


def helm_template(tmp_path, values, namespace="certctl-system"):
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))  # JSON is YAML
    proc = subprocess.run([find_helm(), "template", "hook", CHART, "--namespace", namespace,
                           "-f", str(path)], capture_output=True, text=True, timeout=30,
                          env=helm_env(tmp_path / "helm-home", os.devnull))
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def one(objects, kind):
    found = [obj for obj in objects if obj["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}"
    return found[0]


@pytest.mark.parametrize("targets", [
    {"validatingWebhooks": ["hook-v1", "hook-v2"], "mutatingWebhooks": ["hook-m"],
     "crds": ["widgets.hook.io", "gadgets.hook.io"], "apiServices": ["v1.metrics.hook.io"],
     "webhookSelector": "app=hook"},
    {"crds": ["widgets.hook.io"]},
    BY_SELECTOR,
], ids=["every-kind-and-selector", "crd-only", "selector-only"])
def test_chart_renders_the_table(tmp_path, targets):
    values = {"webhook": {"service": "hook", "namespace": "hooks"}, "secretName": "hook-tls",
              "targets": targets}
    objects = helm_template(tmp_path, values)
    expected = policy_rules(MODE, "hook-tls", targets)
    assert one(objects, "Role")["rules"] == expected["namespace"]
    assert one(objects, "ClusterRole")["rules"] == expected["cluster"]


def test_kustomize_example_grants_what_the_table_says_for_its_job():
    env = dict(os.environ, KUBECONFIG=os.devnull, HOME=EXAMPLES)
    proc = subprocess.run([KUBECTL, "kustomize", EXAMPLES], capture_output=True, text=True,
                          env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    objects = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    args = one(objects, "Job")["spec"]["template"]["spec"]["containers"][0]["args"]

    def values_of(flag):
        return [value for name, value in zip(args, args[1:]) if name == flag]

    targets = {key: values_of(flag) for key, flag in TARGET_FLAGS.items()}
    targets["webhookSelector"] = "".join(targets["webhookSelector"])
    [secret] = values_of("--secret")
    expected = policy_rules(MODE, secret, targets)
    assert one(objects, "Role")["rules"] == expected["namespace"]
    assert one(objects, "ClusterRole")["rules"] == expected["cluster"]
