"""Granted == used: the chart's permission table (manifests/helm/certctl/permissions.yaml)
against the requests `certctl job` (mode job) and `certctl run` (mode sidecar) really send.

Each scenario runs certctl against a fresh emulator as a user that holds exactly what the
table grants for the scenario's Secret and targets (harness/rbac.py). The job's scenarios
that need no injected fault run on the real API server too, where the grant is a real Role
and ClusterRole bound to a ServiceAccount, kube-apiserver's authorizer decides, and its
audit log is the request log. The request log then
shows what the code used: every request must be granted, and every (rule, verb, resource)
of the table must be the one grant that lets some request through, so the table grants
nothing that no code path needs. Taking any single verb away must break the scenario that
needs it. Last, the chart's rendered RBAC and the kustomize examples must say what the table
says.

A `certctl run` scenario is a sequence of steps, each an outcome the controller promises
(ready, Events recorded, a blanked caBundle repaired by its watch, a Lease renewed); a step
that does not happen within its bound breaks the scenario. A list or watch pinned by
fieldSelector=metadata.name=X is authorized as a request for X (harness.rbac.request_name).
"""

import base64
import json
import os
import signal
import subprocess
import threading
import time

import pytest
import yaml

from harness import Cluster
from harness.real_cluster import RealCluster
from harness.certctl import (api_service, crd, run_certctl, service_with_endpoints,
                             webhook_configuration)
from harness.helm import CERTCTL_IMAGE, REPO, find_helm, helm_env
from harness.kubelet import ContainerProcess, free_ports
from harness.kustomize import kustomize
from harness.rbac import (CHART, SCOPES, controller_rules, grants, policy_rules, request_name,
                          table_rules)
from kubeemu.auth import rule_allows

MODE = "job"
NS = "infra"
SECRET = "webhook-server-cert"
USER = f"system:serviceaccount:{NS}:certctl"
VWC = "ValidatingWebhookConfiguration"
MWC = "MutatingWebhookConfiguration"
SELECTOR = "example.com/ca-bundle=certctl"
EXAMPLES = os.path.join(REPO, "manifests", "examples")

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
    # The leaf lacks the new name: re-issued, Secret updated.
    bed.job("--dns-name", "hook.example.com")


def secret_update_conflict(bed):
    bed.job()
    bed.cluster.inject_fault(method="PUT", path=f"/secrets/{SECRET}$", status=409)
    bed.job("--dns-name", "hook.example.com")  # reads the Secret again, then updates it


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


FAIL_CLOSED = {"failurePolicyOnceReady": "Fail", "webhook": {"service": "hook"}}


class StepMissing(AssertionError):
    """A step of a job scenario did not happen as the full grant makes it happen."""


def set_ignore(cluster, obj):
    cluster.kubectl("patch", obj["kind"].lower(), obj["metadata"]["name"], "--type", "json",
                    "-p", json.dumps([{"op": "replace", "path": f"/webhooks/{i}/failurePolicy",
                                       "value": "Ignore"} for i in range(len(obj["webhooks"]))]))


def policies_of(cluster, obj):
    live = json.loads(cluster.kubectl("get", obj["kind"].lower(), obj["metadata"]["name"],
                                      "-o", "json").stdout)
    return [w.get("failurePolicy") for w in live["webhooks"]]


def fail_closed_once_callable(bed):
    """--failure-policy-once-ready: the job reads the webhook's Service and its EndpointSlices
    and sets Fail only once an endpoint is ready (here 2 s after it starts)."""
    vwc = next(obj for obj in target_objects(bed.targets) if obj["kind"] == VWC)
    set_ignore(bed.cluster, vwc)
    service, slice_ = service_with_endpoints("hook", NS, ready=(False,))
    bed.apply(service)
    bed.apply(slice_)
    became_ready = []

    def endpoint_ready():
        time.sleep(2)
        slice_["endpoints"][0]["conditions"]["ready"] = True
        bed.apply(slice_)
        became_ready.append(time.monotonic())

    later = threading.Thread(target=endpoint_ready)
    later.start()
    try:
        bed.job("--failure-policy-once-ready", "Fail", "--wait-for-targets", "30s")
        ended = time.monotonic()
    finally:
        later.join()
    if bed.results[-1].returncode == 0 and ended < became_ready[0]:
        raise StepMissing("failurePolicy Fail was set before the Service had a ready endpoint")


class Scenario:
    """A code path: `run` drives it, `outcome` is what the last job run logs when the path
    was taken, and `needs` are the (table rule, verb) pairs this scenario is the designated
    proof for: taking one of them away must make it fail."""

    def __init__(self, run, targets, outcome, needs=(), name=None, faults=False, top=None):
        self.name = name or run.__name__.replace("_", "-")
        self.run = run
        self.targets = targets
        self.outcome = outcome
        self.needs = set(needs)
        self.faults = faults  # injects faults: the emulator's alone
        self.top = top  # chart values beyond the targets (rbac.chart_values)


SCENARIOS = [
    Scenario(fresh_install, NAMED, "injected the CA bundle into 5 of 5", needs={
        ("secret", "get"), ("secret-create", "create"),
        *((rule, verb) for rule in ("validating-webhooks", "mutating-webhooks", "crds",
                                    "apiservices") for verb in ("get", "patch"))}),
    Scenario(steady_state, NAMED, "already hold the CA bundle"),
    Scenario(blanked_bundle, NAMED, "injected the CA bundle into 1 of 5"),
    Scenario(secret_update, NAMED, "re-issued the server certificate",
             needs={("secret", "update")}),
    Scenario(secret_update_conflict, NAMED, "re-issued the server certificate", faults=True),
    Scenario(adopt, NAMED, f"adopted secret/{NS}/{SECRET}"),
    Scenario(target_patch_conflict, NAMED, "injected the CA bundle into 1 of 5", faults=True),
    Scenario(phases_with_a_late_target, NAMED, "injected the CA bundle into 5 of 5"),
    Scenario(selector, BY_SELECTOR, "injected the CA bundle into 3 of 3",
             needs={("selected-webhooks", verb) for verb in ("list", "get", "patch")},
             faults=True),
    Scenario(fail_closed_once_callable, NAMED, "set failurePolicy Fail on 2 webhook entries",
             needs={("webhook-service", "get"), ("webhook-endpointslices", "list")},
             top=FAIL_CLOSED),
]
BACKENDS = {"emulator": Cluster, "real": RealCluster}


def run_scenario(binary, scenario, rules, backend="emulator"):
    """Runs `scenario` on a fresh API server as USER holding `rules`; returns the job
    results, USER's requests, and the injected faults no request consumed."""
    with BACKENDS[backend]() as cluster:
        bed = Bed(cluster, binary, scenario.targets, rules)
        try:
            scenario.run(bed)
        except StepMissing as e:  # a failure as the job's own exit 1 would be
            bed.results.append(subprocess.CompletedProcess([], 1, "", str(e)))
        requests = [e for e in cluster.request_log()["requests"] if e["user"] == USER]
        unconsumed = (cluster.api("GET", "/_emulator/faults").json()["faults"]
                      if backend == "emulator" else [])
    return bed.results, requests, unconsumed


def describe(entry):
    where = f"{entry['namespace']}/" if entry["namespace"] else ""
    return f"{entry['verb']} {entry['resource']} {where}{entry['name']} ({entry['code']})"


def check_scenario(binary, scenario, backend):
    """Runs the scenario under the table's grant: every job succeeds, every request is
    granted and allowed, and the scenario uses what it is the proof for. Returns the (rule,
    verb, resource) triples that only one grant allowed."""
    scenario_grants = grants(MODE, SECRET, scenario.targets, top=scenario.top)
    rules = [grant.emulator_rule(NS) for grant in scenario_grants]
    results, requests, unconsumed = run_scenario(binary, scenario, rules, backend)
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
    return needed


def test_every_request_is_granted_and_every_grant_is_used(certctl_binary):
    granted = {(rule["name"], verb, resource) for rule in table_rules(MODE)
               for verb in rule["verbs"] for resource in rule["resources"]}
    used = set()
    for scenario in SCENARIOS:
        used |= check_scenario(certctl_binary, scenario, "emulator")
    unused = granted - used
    assert not unused, f"granted, but no code path needs it: {sorted(unused)}"


@pytest.mark.time_limit(120)
def test_the_real_authorizer_allows_every_request_of_the_job(certctl_binary):
    """The scenarios without faults on the real API server: its authorizer allows every
    request under the table's grant, and the job uses there what it uses on the emulator."""
    for scenario in SCENARIOS:
        if not scenario.faults:
            real = check_scenario(certctl_binary, scenario, "real")
            emulated = check_scenario(certctl_binary, scenario, "emulator")
            assert real == emulated, f"{scenario.name}: {sorted(real ^ emulated)}"


ABLATIONS = [(scenario, rule, verb) for scenario in SCENARIOS
             for rule, verb in sorted(scenario.needs)]
# On the real API server, one ablation of each scenario that needs no fault: its authorizer
# refuses what the table leaves out. The rest stay on the emulator (on the real server they
# would only repeat that, at the cost of a control plane each; the scenarios with faults
# need the emulator), whose authorizer test_the_real_authorizer_allows_every_request_of_the_job
# holds to the real one.
REAL_ABLATIONS = {(scenario.name, *sorted(scenario.needs)[0]) for scenario in SCENARIOS
                  if scenario.needs and not scenario.faults}
BACKEND_ABLATIONS = [("real" if (scenario.name, rule, verb) in REAL_ABLATIONS else "emulator",
                      scenario, rule, verb) for scenario, rule, verb in ABLATIONS]


def test_each_verb_of_the_table_has_a_scenario_to_prove_it_needed():
    granted = {(rule["name"], verb) for rule in table_rules(MODE) for verb in rule["verbs"]}
    designated = [(rule, verb) for _, rule, verb in ABLATIONS]
    assert sorted(designated) == sorted(granted)


@pytest.mark.parametrize("backend, scenario, rule, verb", BACKEND_ABLATIONS,
                         ids=[f"{s.name}:{rule}:{verb}:{b}" for b, s, rule, verb in
                              BACKEND_ABLATIONS])
def test_without_one_verb_the_scenario_needing_it_fails(certctl_binary, backend, scenario, rule,
                                                         verb):
    rules, resources = [], None
    for grant in grants(MODE, SECRET, scenario.targets, top=scenario.top):
        emulator_rule = grant.emulator_rule(NS)
        if grant.name == rule:
            resources = set(emulator_rule["resources"])
            emulator_rule["verbs"].remove(verb)
            if not emulator_rule["verbs"]:
                continue
        rules.append(emulator_rule)
    assert resources, f"the scenario's targets do not bring rule {rule}"
    results, requests, _ = run_scenario(certctl_binary, scenario, rules, backend)
    assert any(result.returncode == 1 for result in results), \
        [result.stderr for result in results]
    refused = {(e["verb"], e["resource"]) for e in requests if e["code"] == 403}
    assert refused, "nothing was refused"
    assert {v for v, _ in refused} == {verb} and {r for _, r in refused} <= resources, refused


# --- mode sidecar: `certctl run` ----------------------------------------------------------

RUN = "sidecar"
LEASE = f"{SECRET}-certctl"
# How long a step may take. Under the table's whole grant every step must happen, and the
# bound is generous (a loaded 2-core machine). Once a verb is taken away, a step that has
# not happened within what it takes when nothing is missing is not coming: the ablated
# bounds keep the 30-odd ablation runs short.
RUN_BOUND = 20.0
ABLATED_BOUND = 8.0   # ready, or a Lease renewed (every 2 s)
REPAIR_BOUND = 2.5    # a watch-driven repair: certctl promises 2 s
EVENTS_BOUND = 2.0    # Events are recorded before the pass that wrote reports ready
POLL = 0.05

API = {VWC: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
       MWC: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
       "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
       "APIService": "/apis/apiregistration.k8s.io/v1/apiservices"}
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}"


class Broken(AssertionError):
    """A step of a `certctl run` scenario did not happen."""


def object_path(obj):
    return f"{API[obj['kind']]}/{obj['metadata']['name']}"


def bundle_paths(obj):
    """JSON pointers of every caBundle of a target object."""
    if obj["kind"] in (VWC, MWC):
        return [f"/webhooks/{i}/clientConfig/caBundle" for i in range(len(obj["webhooks"]))]
    if obj["kind"] == "CustomResourceDefinition":
        return ["/spec/conversion/webhook/clientConfig/caBundle"]
    return ["/spec/caBundle"]


def pointer(obj, path):
    for part in path.strip("/").split("/"):
        obj = obj[int(part)] if isinstance(obj, list) else obj.get(part, "")
    return obj


def watch_reason(obj):
    """How certctl names a change its watch of `obj` reported (loop/sidecar.cc)."""
    return f"{obj['kind'].lower()}/{obj['metadata']['name']} modified"


class RunBed:
    """One `certctl run` scenario's emulator: the namespace and the targets' objects, USER
    holding `rules`, and the controller as a local process with in-cluster configuration,
    its own certificate folder and health port, and a debug log (which names what started
    each pass). `ablated`: a verb was taken away, so steps give up sooner."""

    def __init__(self, cluster, binary, workdir, targets, rules, ablated):
        self.cluster = cluster
        self.binary = binary
        self.workdir = workdir
        self.targets = targets
        self.ablated = ablated
        self.objects = target_objects(targets)
        self.process = None
        self.exit_code = None
        self.check(cluster.api("POST", "/api/v1/namespaces",
                               {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": NS}}), 201)
        for obj in self.objects:
            self.check(cluster.api("POST", API[obj["kind"]], obj), 201)
        cluster.add_user(USER, rules)

    @staticmethod
    def check(resp, status):
        assert resp.status == status, (resp.status, resp.body[:300])
        return resp.json()

    def start(self, *args):
        self.health_port, = free_ports(1)
        argv = [self.binary, "run", "--service", "hook", "-n", NS, "--secret", SECRET,
                *target_flags(self.targets), "--cert-dir", os.path.join(self.workdir, "certs"),
                "--health-addr", f"127.0.0.1:{self.health_port}", "--metrics-addr", "",
                "--log-level", "debug", *args]
        self.process = ContainerProcess(argv, self.cluster.in_cluster_env(USER, NS),
                                        self.workdir, name="certctl").start()

    def stop(self):
        if self.process is not None and self.exit_code is None:
            self.exit_code = self.process.stop(signal.SIGTERM)

    def readyz(self):
        return self.process.get("/readyz", self.health_port)

    def get(self, path):
        return self.check(self.cluster.api("GET", path), 200)

    def until(self, what, condition, ablated_bound=ABLATED_BOUND, broken_by_log=None):
        """Polls `condition` until it holds. Breaks the scenario when certctl exits, when
        RUN_BOUND passes first, or once a verb was taken away: when `ablated_bound`
        passes first, or as soon as /readyz reports a refusal or the log a refused pass,
        or a log line containing `broken_by_log` does."""
        limit = ablated_bound if self.ablated else RUN_BOUND
        deadline = time.monotonic() + limit
        while True:
            # A refused pass may be retried and succeed before a poll of /readyz sees its
            # 503 (the retry can meet no conflict, say), even before the first poll; its log
            # line stays.
            if self.ablated and any("reconcile failed: " in line and "is forbidden" in line
                                    for line in self.process.log().splitlines()):
                raise Broken(f"{what}: certctl logged a refused pass")
            if condition():
                return
            status, body = self.readyz()
            if not self.process.alive():
                raise Broken(f"{what}: certctl exited\n{self.process.log()[-3000:]}")
            if self.ablated and status == 503 and "forbidden" in body:
                raise Broken(f"{what}: {body.strip()}")
            if self.ablated and broken_by_log and any(
                    broken_by_log in line and "forbidden" in line
                    for line in self.process.log().splitlines()):
                raise Broken(f"{what}: certctl logged a refusal of {broken_by_log}")
            if time.monotonic() > deadline:
                raise Broken(f"{what}: not within {limit:g}s; /readyz {status} {body.strip()}"
                             f"\n{self.process.log()[-3000:]}")
            time.sleep(POLL)

    def ready(self, broken_by_log=None):
        self.until("ready", lambda: self.readyz()[0] == 200, broken_by_log=broken_by_log)

    def passes_for(self, reason):
        """How many passes so far were started (among other reasons) by `reason`."""
        count = 0
        for line in self.process.log().splitlines():
            _, found, reasons = line.partition("reconciling: ")
            count += bool(found) and reason in reasons.split(", ")
        return count

    def secret(self):
        return self.get(SECRET_PATH)

    def ca(self):
        return base64.b64decode(self.secret()["data"]["ca.crt"]).decode()

    def bundles(self, obj):
        live = self.get(object_path(obj))
        return [base64.b64decode(pointer(live, path) or "").decode()
                for path in bundle_paths(obj)]

    def injected(self, objects=None):
        ca = self.ca()
        return all(set(self.bundles(obj)) == {ca} for obj in objects or self.objects)

    def events(self, namespace):
        return self.get(f"/api/v1/namespaces/{namespace}/events")["items"]

    def events_recorded(self):
        """Created on the Secret, in its namespace; CABundleInjected on every target, in
        the namespace default (they are cluster-scoped)."""
        def has(namespace, reason, kind, name):
            return any(e["reason"] == reason and e["involvedObject"]["kind"] == kind and
                       e["involvedObject"]["name"] == name and
                       e["source"].get("component") == "certctl"
                       for e in self.events(namespace))
        self.until("Events recorded", lambda: has(NS, "Created", "Secret", SECRET) and all(
            has("default", "CABundleInjected", obj["kind"], obj["metadata"]["name"])
            for obj in self.objects), ablated_bound=EVENTS_BOUND)

    def counted(self, namespace, reason, kind, name):
        """Until certctl's `reason` Event about `name` counts a repeat: one Event, patched."""
        def twice():
            series = [e for e in self.events(namespace)
                      if e["reason"] == reason and e["involvedObject"]["kind"] == kind and
                      e["involvedObject"]["name"] == name]
            return len(series) == 1 and series[0].get("count", 1) >= 2
        self.until(f"a second {reason} counted on its Event", twice,
                   ablated_bound=EVENTS_BOUND, broken_by_log="count event")

    def repaired_by_watch(self, what, reason, damage, repaired):
        """`damage()` as admin, then `repaired()` must hold after a pass started by the
        watch event `reason`: a re-list after a refused watch, or a retry, is not the
        watch-driven repair certctl promises."""
        before = self.passes_for(reason)
        damage()
        self.until(what, lambda: self.passes_for(reason) > before and repaired(),
                   ablated_bound=REPAIR_BOUND)

    def blank(self, obj):
        patch = [{"op": "replace", "path": bundle_paths(obj)[0], "value": ""}]
        self.check(self.cluster.api("PATCH", object_path(obj), patch,
                                    content_type="application/json-patch+json"), 200)

    def repair_bundle(self, obj):
        self.repaired_by_watch(f"{obj['kind']} {obj['metadata']['name']} repaired",
                               watch_reason(obj), lambda: self.blank(obj),
                               lambda: self.injected([obj]))


def cold_start_and_repairs(bed):
    """Ready from nothing; Events; a blanked caBundle and a broken Secret repaired, twice
    each (the repeat counted on the Event recorded first)."""
    bed.start()
    bed.ready()
    assert bed.secret()["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "certctl"
    assert bed.injected()
    bed.events_recorded()
    [vwc] = bed.objects
    bed.repair_bundle(vwc)

    def break_secret():
        # tls.crt replaced by the CA: the key no longer matches, the leaf is re-issued.
        secret = bed.secret()
        secret["data"]["tls.crt"] = secret["data"]["ca.crt"]
        bed.check(bed.cluster.api("PUT", SECRET_PATH, secret), 200)

    def leaf_again():
        data = bed.secret()["data"]
        return data["tls.crt"] != data["ca.crt"]
    bed.repaired_by_watch("Secret repaired", f"secret/{NS}/{SECRET} modified", break_secret,
                          leaf_again)
    # Each a second time: the repeat counts on the Event recorded first.
    bed.repair_bundle(vwc)
    bed.counted("default", "CABundleInjected", vwc["kind"], vwc["metadata"]["name"])
    bed.repaired_by_watch("Secret repaired again", f"secret/{NS}/{SECRET} modified",
                          break_secret, leaf_again)
    bed.counted(NS, "LeafReissued", "Secret", SECRET)


def one_target_kind(bed):
    """Ready with a target of another kind; its blanked caBundle repaired."""
    bed.start()
    bed.ready()
    assert bed.injected()
    [obj] = bed.objects
    bed.repair_bundle(obj)


def leader_election(bed):
    """--leader-elect: the Lease is created and held, then renewed."""
    bed.start("--leader-elect", "--identity", "bed")
    bed.ready(broken_by_log="leader election:")
    assert bed.injected()
    first = bed.get(LEASE_PATH)["spec"]
    assert first["holderIdentity"] == "bed", first
    bed.until("Lease renewed",
              lambda: bed.get(LEASE_PATH)["spec"]["renewTime"] != first["renewTime"],
              broken_by_log="leader election:")


def selected_targets(bed):
    """--webhook-selector: a patch conflict on each match (read again, patched again), then
    a blanked caBundle repaired by the label-selected watch."""
    for resource in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        bed.cluster.inject_fault(method="PATCH", path=f"/{resource}/labelled$", status=409)
    bed.start()
    bed.ready()
    assert bed.injected()
    vwc = next(obj for obj in bed.objects if obj["kind"] == VWC)
    bed.repaired_by_watch("selected configuration repaired",
                          f"validatingwebhookconfigurations {SELECTOR} modified",
                          lambda: bed.blank(vwc), lambda: bed.injected([vwc]))


def sidecar_fails_closed_once_callable(bed):
    """--failure-policy-once-ready: Ignore stays while the webhook's Service has no ready
    endpoint (read from its EndpointSlices); Fail comes once it has one, without a signal."""
    [vwc] = bed.objects
    set_ignore(bed.cluster, vwc)
    service, slice_ = service_with_endpoints("hook", NS, ready=(False,))
    bed.cluster.kubectl("apply", "-f", "-", input=json.dumps(service))
    bed.cluster.kubectl("apply", "-f", "-", input=json.dumps(slice_))
    bed.start("--failure-policy-once-ready", "Fail")
    bed.ready()
    bed.until("the entries kept at Ignore for want of an endpoint",
              lambda: "kept failurePolicy Ignore" in bed.process.log(),
              broken_by_log="kept failurePolicy Ignore")
    if policies_of(bed.cluster, vwc) != ["Ignore", "Ignore"]:
        raise Broken("failurePolicy Fail before the Service had a ready endpoint")
    slice_["endpoints"][0]["conditions"]["ready"] = True
    bed.cluster.kubectl("apply", "-f", "-", input=json.dumps(slice_))
    bed.until("failurePolicy Fail once an endpoint is ready",
              lambda: policies_of(bed.cluster, vwc) == ["Fail", "Fail"])


ONE_VWC = {"validatingWebhooks": ["hook"]}
WATCHED = ("get", "list", "watch", "patch")
RUN_SCENARIOS = [
    Scenario(cold_start_and_repairs, ONE_VWC, None, needs={
        *(("secret", verb) for verb in ("get", "list", "watch", "update")),
        ("secret-create", "create"), ("events", "create"), ("cluster-events", "create"),
        ("events", "patch"), ("cluster-events", "patch"),
        *(("validating-webhooks", verb) for verb in WATCHED)}),
    # One target per scenario: each is ready sooner than with all of them (client-side
    # rate limit), and a broken watch shows at once.
    *(Scenario(one_target_kind, {key: [name]}, None, name=f"one-{rule}",
               needs={(rule, verb) for verb in WATCHED})
      for key, name, rule in (("mutatingWebhooks", "hook", "mutating-webhooks"),
                              ("crds", "widgets.hook.io", "crds"),
                              ("apiServices", "v1.metrics.hook.io", "apiservices"))),
    Scenario(leader_election, ONE_VWC, None, needs={
        ("lease", "get"), ("lease", "update"), ("lease-create", "create")}),
    Scenario(selected_targets, BY_SELECTOR, None, needs={
        ("selected-webhooks", verb) for verb in WATCHED}),
    Scenario(sidecar_fails_closed_once_callable, ONE_VWC, None, top=FAIL_CLOSED, needs={
        ("webhook-service", "get"), ("webhook-endpointslices", "list")}),
]


def run_sidecar_scenario(binary, scenario, rules, workdir, ablated=False):
    """Runs a `certctl run` scenario on a fresh emulator as USER holding `rules`; returns
    what broke it (None when every step happened), certctl's exit code on SIGTERM, its log,
    USER's requests, and the injected faults no request consumed."""
    with Cluster() as cluster:
        bed = RunBed(cluster, binary, str(workdir), scenario.targets, rules, ablated)
        broken = None
        try:
            scenario.run(bed)
        except Broken as e:
            broken = e
        finally:
            bed.stop()
        requests = [e for e in cluster.request_log()["requests"] if e["user"] == USER]
        unconsumed = cluster.api("GET", "/_emulator/faults").json()["faults"]
        log = bed.process.log() if bed.process else ""
    return broken, bed.exit_code, log, requests, unconsumed


def sidecar_rules(scenario, leave_out=None):
    """The table's grant for the scenario as emulator rules (with `leave_out` = (rule, verb)
    taken away), and the resources of the rule it was taken from."""
    rules, resources = [], None
    sidecar = {"leaderElection": scenario.run is leader_election}
    for grant in grants(RUN, SECRET, scenario.targets, sidecar, scenario.top):
        rule = grant.emulator_rule(NS)
        if leave_out and grant.name == leave_out[0]:
            resources = set(rule["resources"])
            rule["verbs"].remove(leave_out[1])
            if not rule["verbs"]:
                continue
        rules.append(rule)
    return rules, resources


def test_sidecar_every_request_is_granted_and_every_grant_is_used(certctl_binary, tmp_path):
    granted = {(rule["name"], verb, resource) for rule in table_rules(RUN)
               for verb in rule["verbs"] for resource in rule["resources"]}
    used = set()
    for scenario in RUN_SCENARIOS:
        rules, _ = sidecar_rules(scenario)
        scenario_grants = grants(RUN, SECRET, scenario.targets,
                                 {"leaderElection": scenario.run is leader_election},
                                 scenario.top)
        broken, exit_code, log, requests, unconsumed = run_sidecar_scenario(
            certctl_binary, scenario, rules, tmp_path / scenario.name)
        assert broken is None, f"{scenario.name}: {broken}"
        assert exit_code == 0, f"{scenario.name}: exit {exit_code}\n{log[-3000:]}"
        assert unconsumed == [], f"{scenario.name}: an injected fault was never hit"
        needed = set()
        for entry in requests:
            assert entry["resource"], f"{scenario.name}: non-resource request {entry['path']}"
            assert entry["code"] != 403, f"{scenario.name}: refused: {describe(entry)}"
            name = request_name(entry)
            allowing = [grant.name for grant, rule in zip(scenario_grants, rules)
                        if rule_allows(rule, entry["verb"], entry["apiGroup"], entry["resource"],
                                       entry["subresource"], entry["namespace"], name)]
            assert allowing, f"{scenario.name}: not granted by the table: {describe(entry)}"
            if len(allowing) == 1:
                needed.add((allowing[0], entry["verb"], entry["resource"]))
        assert scenario.needs <= {(rule, verb) for rule, verb, _ in needed}, \
            f"{scenario.name}: did not use {scenario.needs - {(r, v) for r, v, _ in needed}}"
        used |= needed
    unused = granted - used
    assert not unused, f"granted, but no code path of certctl run needs it: {sorted(unused)}"


RUN_ABLATIONS = [(scenario, rule, verb) for scenario in RUN_SCENARIOS
                 for rule, verb in sorted(scenario.needs)]


def test_sidecar_each_verb_of_the_table_has_a_scenario_to_prove_it_needed():
    granted = {(rule["name"], verb) for rule in table_rules(RUN) for verb in rule["verbs"]}
    designated = [(rule, verb) for _, rule, verb in RUN_ABLATIONS]
    assert sorted(designated) == sorted(granted)


@pytest.mark.parametrize("scenario, rule, verb", RUN_ABLATIONS,
                         ids=[f"{s.name}:{rule}:{verb}" for s, rule, verb in RUN_ABLATIONS])
def test_sidecar_without_one_verb_the_scenario_needing_it_breaks(certctl_binary, tmp_path,
                                                                 scenario, rule, verb):
    rules, resources = sidecar_rules(scenario, leave_out=(rule, verb))
    assert resources, f"the scenario's targets do not bring rule {rule}"
    broken, _, log, requests, _ = run_sidecar_scenario(certctl_binary, scenario, rules,
                                                       tmp_path, ablated=True)
    assert broken is not None, f"every step happened without {rule}:{verb}\n{log[-3000:]}"
    refused = {(e["verb"], e["resource"]) for e in requests if e["code"] == 403}
    assert refused, f"nothing was refused; broken by: {broken}"
    assert {v for v, _ in refused} == {verb} and {r for _, r in refused} <= resources, refused


# --- the table itself, the chart and the example ------------------------------------------


def assert_rules_explained_and_without_wildcards(rules, scopes):
    """Unique names, a known scope, a reason for the rule and each verb, no `*`, no delete."""
    assert len({rule["name"] for rule in rules}) == len(rules), "rule names are unique"
    for rule in rules:
        assert rule["scope"] in scopes, rule
        assert rule["why"].strip(), rule["name"]
        assert rule["verbs"] and all(reason.strip() for reason in rule["verbs"].values()), \
            f"{rule['name']}: every verb says why it is needed"
        for field in ("apiGroups", "resources"):
            assert rule[field] and "*" not in rule[field], rule
        assert not set(rule["verbs"]) & {"*", "delete", "deletecollection"}, rule


@pytest.mark.parametrize("mode", ["job", "sidecar"])
def test_table_rules_are_complete_and_least_privilege(mode):
    rules = table_rules(mode)
    assert_rules_explained_and_without_wildcards(rules, SCOPES)
    for rule in rules:
        if "secrets" in rule["resources"] and not rule.get("resourceNames"):
            # Listing or watching every Secret of a namespace would read every key in it.
            assert not set(rule["verbs"]) & {"list", "watch"}, rule
        if not rule.get("resourceNames"):
            # Unnamed: only what cannot be named (create; and Events, which have generated
            # names, counted by a patch of the first), or behind an explicit switch.
            assert (set(rule["verbs"]) == {"create"} or rule.get("when") or
                    (rule["resources"] == ["events"] and
                     set(rule["verbs"]) == {"create", "patch"})), rule
        if rule["scope"] == "default":
            # The namespace default only takes Events about cluster-scoped objects.
            assert rule["resources"] == ["events"] and \
                set(rule["verbs"]) == {"create", "patch"}, rule
    if mode == "job":
        # One-shot: the job never watches, and records no Events.
        verbs = {verb for rule in rules for verb in rule["verbs"]}
        assert "watch" not in verbs
        assert not any("events" in rule["resources"] for rule in rules)


def helm_template(tmp_path, values, namespace="certctl-system"):
    path = tmp_path / "values.json"
    path.write_text(json.dumps({"image": CERTCTL_IMAGE, **values}))  # JSON is YAML
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
@pytest.mark.parametrize("fail_closed", [False, True], ids=["", "failure-policy-once-ready"])
def test_chart_renders_the_table(tmp_path, targets, fail_closed):
    values = {"mode": MODE, "webhook": {"service": "hook", "namespace": "hooks"},
              "secretName": "hook-tls", "targets": targets}
    top = {"webhook": {"service": "hook"}}
    if fail_closed:
        values["failurePolicyOnceReady"] = "Fail"
        top["failurePolicyOnceReady"] = "Fail"
    objects = helm_template(tmp_path, values)
    expected = policy_rules(MODE, "hook-tls", targets, top=top)
    assert one(objects, "Role")["rules"] == expected["namespace"]
    assert one(objects, "ClusterRole")["rules"] == expected["cluster"]


# SPEC 9b's grant for `certctl controller`, as (resource, verb); the controller needs less
# (no patch of Secrets, no update of targets) and two things more: EndpointSlices list for
# certctl.io/failure-policy-once-ready, as SPEC 12 grants `run`, events patch for a repeat, and
# namespaces list and watch for --namespace-selector.
CONTROLLER_SPEC = ({("services", v) for v in ("get", "list", "watch")}
                   | {("secrets", v) for v in ("get", "list", "watch", "create", "update",
                                               "patch")}
                   | {(kind, v) for kind in ("validatingwebhookconfigurations",
                                             "mutatingwebhookconfigurations",
                                             "customresourcedefinitions", "apiservices")
                      for v in ("get", "list", "watch", "patch", "update")}
                   | {("events", "create"), ("leases", "get"), ("leases", "create"),
                      ("leases", "update")})
CONTROLLER_BEYOND_SPEC = {("endpointslices", "list"), ("events", "patch"),
                          ("namespaces", "list"), ("namespaces", "watch")}


def test_controller_rules_are_spec_9b_and_nothing_wider():
    rules = table_rules("controller")
    assert_rules_explained_and_without_wildcards(rules, ("watched", "release", "default",
                                                         "cluster"))
    granted = set()
    for rule in rules:
        granted |= {(resource, verb) for resource in rule["resources"] for verb in rule["verbs"]}
    assert granted - CONTROLLER_SPEC == CONTROLLER_BEYOND_SPEC, granted - CONTROLLER_SPEC
    # The Lease is the controller's own: named, in the release namespace.
    (lease,) = [r for r in rules if r["resources"] == ["leases"] and "get" in r["verbs"]]
    assert lease["scope"] == "release" and lease["resourceNames"] == "controller.leaseName"


def rules_of(objects, kind, name=None, namespace=None):
    found = [obj for obj in objects if obj["kind"] == kind
             and (name is None or obj["metadata"]["name"] == name)
             and (namespace is None or obj["metadata"].get("namespace") == namespace)]
    assert len(found) == 1, f"expected one {kind} {name or ''} in {namespace or 'the cluster'}"
    return found[0]["rules"]


def test_chart_renders_the_controller_table_cluster_wide(tmp_path):
    objects = helm_template(tmp_path, {"mode": "controller"})
    expected = controller_rules("certctl-system")
    release = [rule for rule in expected if rule.pop("namespaces", None)]

    def unordered(rules):
        return sorted(json.dumps(rule, sort_keys=True) for rule in rules)

    # The ClusterRole holds the target rules, then the watched ones.
    assert unordered(rules_of(objects, "ClusterRole")) == unordered(
        rule for rule in expected if rule not in release)
    assert rules_of(objects, "Role", namespace="certctl-system") == release
    assert {obj["kind"] for obj in objects} >= {"Deployment", "PodDisruptionBudget",
                                                 "ServiceAccount", "ClusterRoleBinding",
                                                 "RoleBinding"}


def test_chart_renders_the_controller_table_per_namespace(tmp_path):
    objects = helm_template(tmp_path, {"mode": "controller",
                                       "controller": {"namespaces": ["team-a", "team-b"]}})
    expected = controller_rules("certctl-system", watched=["team-a", "team-b"])
    by_namespaces = {}
    for rule in expected:
        by_namespaces.setdefault(tuple(rule.pop("namespaces", ())), []).append(rule)
    cluster_rules = rules_of(objects, "ClusterRole", name="hook-certctl-certctl-system")
    watched_rules = rules_of(objects, "ClusterRole", name="hook-certctl-certctl-system-watched")
    assert cluster_rules == by_namespaces[()]
    assert watched_rules == by_namespaces[("team-a", "team-b")]
    assert rules_of(objects, "Role", namespace="default") == by_namespaces[("default",)]
    assert rules_of(objects, "Role", namespace="certctl-system") == \
        by_namespaces[("certctl-system",)]
    bound = {(obj["metadata"]["namespace"], obj["roleRef"]["name"]) for obj in objects
             if obj["kind"] == "RoleBinding"}
    assert {("team-a", "hook-certctl-certctl-system-watched"),
            ("team-b", "hook-certctl-certctl-system-watched")} <= bound, bound
    args = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:5] == ["controller", "--namespace", "team-a", "--namespace", "team-b"], args


def test_kustomize_example_grants_what_the_table_says_for_its_job():
    _, objects = kustomize(EXAMPLES)
    args = one(objects, "Job")["spec"]["template"]["spec"]["containers"][0]["args"]

    def values_of(flag):
        return [value for name, value in zip(args, args[1:]) if name == flag]

    targets = {key: values_of(flag) for key, flag in TARGET_FLAGS.items()}
    targets["webhookSelector"] = "".join(targets["webhookSelector"])
    [secret] = values_of("--secret")
    expected = policy_rules(MODE, secret, targets)
    assert one(objects, "Role")["rules"] == expected["namespace"]
    assert one(objects, "ClusterRole")["rules"] == expected["cluster"]


def certctl_container(pod_spec):
    """The container running certctl: the native sidecar, or an ordinary container."""
    found = [c for c in (pod_spec.get("initContainers") or []) + pod_spec["containers"]
             if c["name"] == "certctl"]
    assert len(found) == 1, "expected one certctl container"
    return found[0]


# kustomize-component/with-certctl: the RBAC of the component manifests/kustomize/certctl-sidecar
# (with validating-webhook/), named and limited by the example's settings.
@pytest.mark.parametrize("folder", ["sidecar", "sidecar/without-native-sidecar",
                                    "kustomize-component/with-certctl"])
def test_sidecar_examples_grant_what_the_table_says_for_their_flags(folder):
    _, objects = kustomize(os.path.join(EXAMPLES, folder))
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    args = certctl_container(pod)["args"]
    assert args[0] == "run"

    def values_of(flag):
        return [value for name, value in zip(args, args[1:]) if name == flag]

    targets = {key: values_of(flag) for key, flag in TARGET_FLAGS.items()}
    targets["webhookSelector"] = "".join(targets["webhookSelector"])
    [secret] = values_of("--secret")
    sidecar = {"leaderElection": "--leader-elect" in args,
               "leaseName": "".join(values_of("--lease-name"))}
    expected = policy_rules(RUN, secret, targets, sidecar)
    namespace = one(objects, "Deployment")["metadata"]["namespace"]
    roles = {role["metadata"]["namespace"]: role for role in
             [obj for obj in objects if obj["kind"] == "Role"]}
    assert set(roles) == {namespace, "default"}
    assert roles[namespace]["rules"] == expected["namespace"]
    assert roles["default"]["rules"] == expected["default"]
    assert one(objects, "ClusterRole")["rules"] == expected["cluster"]
