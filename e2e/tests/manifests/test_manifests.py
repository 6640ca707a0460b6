"""The deployment manifests: the Helm chart (manifests/helm/certctl) and the plain kustomize
example (manifests/examples).

Offline: `helm lint`, `helm template` and `kubectl kustomize` render them; the tests parse
the YAML and check hook ordering and delete policies, that every value reaches the right
`certctl job` flag, least-privilege RBAC (the chart's permissions table) and the security context.
Against the emulator: the rendered objects apply, and the RBAC they grant, loaded into the
emulator's policy, answers `kubectl auth can-i` the way least privilege says.

Helm comes from PATH or .tools/bin/helm; when neither has Helm 3 the session fixture runs
scripts/install-helm.sh, and a Helm that still cannot be found fails the tests.
"""

import copy
import json
import os
import shutil
import subprocess

import pytest
import yaml

from harness.helm import CERTCTL_IMAGE, INSTALL_HELM, by_kind, find_helm, helm_env, one
from harness.kustomize import (MISSING, TEST_IMAGE, certctl_images, documents, kustomize,
                               name_image, run_kustomize)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
CHART = os.path.join(REPO, "manifests", "helm", "certctl")
EXAMPLES = os.path.join(REPO, "manifests", "examples")

RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
ADMISSION = "admissionregistration.k8s.io"
VWC = "validatingwebhookconfigurations"
MWC = "mutatingwebhookconfigurations"

# The `certctl job` command line: flag -> whether it takes a value. Every flag a manifest
# passes must be one of these.
JOB_FLAGS = {
    "--phase": True, "-n": True, "--secret": True, "--service": True, "--dns-name": True,
    "--ip": True, "--cluster-domain": True, "--key-type": True, "--ca-validity": True,
    "--cert-validity": True, "--renew-before": True, "--ca-overlap": True, "--ca-name": True,
    "--ca-organization": True, "--adopt": False, "--validating-webhook": True,
    "--mutating-webhook": True, "--crd": True, "--apiservice": True,
    "--webhook-selector": True, "--wait-for-targets": True, "--log-level": True,
    "--log-format": True,
}
REPEATABLE = {"--dns-name", "--ip", "--validating-webhook", "--mutating-webhook", "--crd",
              "--apiservice"}
# Mode `job` (the hook Jobs); the chart's default mode `sidecar` has its own tests in
# e2e/tests/certctl/test_sidecar_chart.py.
MINIMAL = {"mode": "job", "image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
           "targets": {"validatingWebhooks": ["hook"]}}

# Every knob set to a non-default value.
FULL = {
    "mode": "job",
    "image": {"repository": "registry.example/certctl", "tag": "9.9.9", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "regcred"}],
    "webhook": {"service": "hook", "namespace": "hooks"},
    "secretName": "hook-tls",
    "targets": {
        "validatingWebhooks": ["hook-v1", "hook-v2"],
        "mutatingWebhooks": ["hook-m"],
        "crds": ["widgets.hook.io", "gadgets.hook.io"],
        "apiServices": ["v1.metrics.hook.io"],
        "webhookSelector": "app=hook,tier=admission",
    },
    "certificate": {
        "keyType": "rsa-3072", "caValidity": "5y", "certValidity": "1y",
        "renewBefore": "60d", "caOverlap": "12h", "clusterDomain": "corp.local",
        "extraDnsNames": ["hook.example.com", "hook.internal"],
        "ipAddresses": ["10.0.0.7", "fd00::7"],
        "caName": "Hook Root CA", "caOrganization": "Example Corp",
    },
    "adopt": True,
    "logLevel": "debug",
    "logFormat": "text",
    "job": {
        "waitForTargets": "5m", "backoffLimit": 4, "activeDeadlineSeconds": 900,
        "ttlSecondsAfterFinished": 120,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-cluster-critical",
        "podAnnotations": {"example.com/audit": "yes"},
        "podLabels": {"team": "platform"},
    },
}


def merged(base, **overrides):
    """A deep copy of `base` with top-level sections updated (dicts merge one level)."""
    values = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            values[key].update(value)
        else:
            values[key] = value
    return values


# --- tools ----------------------------------------------------------------------------


class Helm:
    def __init__(self, path, home):
        self.path = path
        self.home = str(home)
        self.values_count = 0

    def run(self, *args, values=None):
        cmd = [self.path, *args]
        if values is not None:
            self.values_count += 1
            path = os.path.join(self.home, f"values-{self.values_count}.yaml")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(values, f)  # JSON is YAML
            cmd += ["-f", path]
        env = helm_env(self.home, os.path.join(self.home, "no-kubeconfig"))
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)

    def template(self, values, namespace="infra", release="hook"):
        proc = self.run("template", release, CHART, "--namespace", namespace, values=values)
        assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
        return proc.stdout, documents(proc.stdout)


@pytest.fixture(scope="session")
def helm(tmp_path_factory):
    return Helm(find_helm(), tmp_path_factory.mktemp("helm"))


# --- object helpers -------------------------------------------------------------------


def annotations(obj):
    return obj["metadata"].get("annotations") or {}


def hook_events(obj):
    return set(filter(None, annotations(obj).get("helm.sh/hook", "").split(",")))


def job_for(objects, phase):
    jobs = [job for job in by_kind(objects, "Job") if parse_args(container(job)["args"])[0]
            .get("--phase") == [phase]]
    assert len(jobs) == 1, f"expected one Job with --phase {phase}"
    return jobs[0]


def container(job):
    containers = job["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["certctl"]
    return containers[0]


def parse_args(args):
    """certctl job args -> ({flag: [values]}, [switches]); fails on anything unknown."""
    assert args[0] == "job", f"the first argument must be the job command: {args}"
    assert all(isinstance(a, str) for a in args), f"every argument must be a string: {args}"
    flags, switches, i = {}, [], 1
    while i < len(args):
        flag = args[i]
        assert flag in JOB_FLAGS, f"unknown certctl job flag {flag!r} in {args}"
        if JOB_FLAGS[flag]:
            assert i + 1 < len(args) and not args[i + 1].startswith("--"), \
                f"{flag} needs a value: {args}"
            flags.setdefault(flag, []).append(args[i + 1])
            i += 2
        else:
            switches.append(flag)
            i += 1
    for flag, got in flags.items():
        assert len(got) == 1 or flag in REPEATABLE, f"{flag} given {len(got)} times: {args}"
    return flags, switches


def expanded_rules(role):
    """A Role/ClusterRole's rules as a set of (group, resource, name or None, verb)."""
    out = set()
    for rule in role.get("rules") or []:
        names = rule.get("resourceNames") or [None]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for name in names:
                    for verb in rule["verbs"]:
                        out.add((group, resource, name, verb))
    return out


def assert_no_wildcards(objects):
    for obj in objects:
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in obj.get("rules") or []:
            for field in ("apiGroups", "resources", "verbs", "resourceNames",
                          "nonResourceURLs"):
                for item in rule.get(field) or []:
                    assert "*" not in item, f"{obj['kind']} {obj['metadata']['name']}: " \
                                            f"wildcard in {field}: {rule}"
        assert not obj.get("aggregationRule"), "aggregated roles grant unknown rights"


def expected_namespace_rules(secret):
    """What `certctl job` needs in the Secret's namespace, and nothing more: it reads the
    Secret by name and writes it whole (PUT), and creates it on first install."""
    rules = {("", "secrets", secret, verb) for verb in ("get", "update")}
    rules.add(("", "secrets", None, "create"))  # create cannot be limited by name
    return rules


def expected_cluster_rules(targets):
    rules = set()
    for key, group, resource in (("validatingWebhooks", ADMISSION, VWC),
                                 ("mutatingWebhooks", ADMISSION, MWC),
                                 ("crds", "apiextensions.k8s.io", "customresourcedefinitions"),
                                 ("apiServices", "apiregistration.k8s.io", "apiservices")):
        for name in targets.get(key) or []:
            rules |= {(group, resource, name, verb) for verb in ("get", "patch")}
    if targets.get("webhookSelector"):
        # list finds the matches; get re-reads one after a conflict. The job never watches.
        rules |= {(ADMISSION, resource, None, verb) for resource in (VWC, MWC)
                  for verb in ("get", "list", "patch")}
    return rules


def assert_bound(objects, binding_kind, role, sa_name, sa_namespace):
    bindings = [b for b in by_kind(objects, binding_kind)
                if b["roleRef"]["name"] == role["metadata"]["name"]]
    assert len(bindings) == 1, f"{role['kind']} {role['metadata']['name']} is bound once"
    binding = bindings[0]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": role["kind"], "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa_name,
                                    "namespace": sa_namespace}]
    if binding_kind == "RoleBinding":
        assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]


def rendered_rbac_user(cluster, objects, sa_name, sa_namespace):
    """A user holding exactly what the rendered RBAC objects grant the ServiceAccount: the
    ServiceAccount itself, with the chart's own Roles, ClusterRoles and bindings applied, by
    its token, so the real API server's authorizer decides. Returns the user name to pass as
    `user=`."""
    kinds = {"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    for obj in objects:
        if obj["kind"] in kinds:
            cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    name = f"system:serviceaccount:{sa_namespace}:{sa_name}"
    cluster.service_account_token(name)
    return name


def assert_secure_pod(job):
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod.get("hostNetwork") is not True and pod.get("hostPID") is not True
    sc = container(job)["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert not sc["capabilities"].get("add")
    assert sc.get("privileged") is not True
    assert "memory" in container(job)["resources"]["limits"]


def can_i(cluster, user, verb, resource, namespace=None):
    args = ["auth", "can-i", verb, resource]
    if namespace:
        args += ["-n", namespace]
    proc = cluster.kubectl(*args, user=user, check=False)
    assert proc.stdout.strip() in ("yes", "no"), proc.stdout + proc.stderr
    return proc.stdout.strip() == "yes"


# --- helm: lint and required values ---------------------------------------------------


@pytest.mark.parametrize("values", [
    MINIMAL,
    FULL,
    merged(MINIMAL, targets={"validatingWebhooks": [], "webhookSelector": "app=hook"}),
    merged(MINIMAL, targets={"validatingWebhooks": [], "crds": ["widgets.hook.io"]}),
], ids=["minimal", "full", "selector", "crd"])
def test_helm_lint_passes_with_required_values(helm, values):
    proc = helm.run("lint", "--strict", CHART, "--namespace", "infra", values=values)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize("values, message", [
    (None, "image.repository is required: no public certctl image exists yet"),
    (merged(MINIMAL, image={"repository": ""}), "image.repository is required"),
    ({"image": CERTCTL_IMAGE, "targets": {"validatingWebhooks": ["hook"]}},
     "webhook.service is required"),
    ({"image": CERTCTL_IMAGE, "webhook": {"service": "hook"}}, "at least one target is required"),
    ({"image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
      "targets": {"validatingWebhooks": [], "crds": [], "webhookSelector": ""}},
     "at least one target is required"),
    (merged(MINIMAL, mode="sidecar"), "sidecar.webhook.image.repository is required"),
    (merged(MINIMAL, serviceAccount={"create": False}), "serviceAccount.name is required"),
], ids=["no-values", "no-image", "no-service", "no-target", "empty-targets", "sidecar",
        "sa-without-name"])
def test_missing_required_values_fail_lint_and_template_with_a_clear_message(
        helm, values, message):
    lint = helm.run("lint", CHART, values=values)
    assert lint.returncode != 0, lint.stdout
    assert message in lint.stdout + lint.stderr
    template = helm.run("template", "hook", CHART, values=values)
    assert template.returncode != 0, template.stdout
    assert message in template.stderr
    assert "certctl: " in template.stderr  # our fail, not a template crash


@pytest.mark.parametrize("override, field", [
    ({"certificate": {"keyType": "rsa-1024"}}, "keyType"),
    ({"certificate": {"caValidity": "10 years"}}, "caValidity"),
    ({"certificate": {"renewBefore": 30}}, "renewBefore"),
    ({"job": {"waitForTargets": "2min"}}, "waitForTargets"),
    # certctl accepts nothing above 100y (3153600000s, 10 digits): a longer number, or an
    # absurdly long combination, fails the schema already.
    ({"certificate": {"certValidity": "99999999999y"}}, "certValidity"),
    ({"job": {"waitForTargets": "1s" * 33}}, "waitForTargets"),
    ({"logFormat": "xml"}, "logFormat"),
    ({"logLevel": "verbose"}, "logLevel"),
    ({"mode": "daemonset"}, "mode"),
    ({"adopt": "yes"}, "adopt"),
    ({"targets": {"validatingWebhooks": "hook"}}, "validatingWebhooks"),
    ({"targets": {"webhookSelector": "  "}}, "webhookSelector"),
    ({"secretName": "Bad_Name"}, "secretName"),
    ({"job": {"backoffLimit": -1}}, "backoffLimit"),
    ({"job": {"ttlSecondsAfterFinished": 0}}, "ttlSecondsAfterFinished"),
    ({"certificte": {}}, "certificte"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_schema_rejects_bad_values(helm, override, field):
    proc = helm.run("template", "hook", CHART, values=merged(MINIMAL, **override))
    assert proc.returncode != 0, f"accepted {override}"
    assert "schema" in proc.stderr and field in proc.stderr, proc.stderr


@pytest.mark.parametrize("override, message", [
    ({"certificate": {"caValidity": "236y"}},
     "certificate.caValidity is 236y, longer than the maximum of 100y"),
    ({"certificate": {"certValidity": "100y1s"}},
     "certificate.certValidity is 100y1s, longer than the maximum of 100y"),
    ({"job": {"waitForTargets": "36501d"}},
     "job.waitForTargets is 36501d, longer than the maximum of 100y"),
    ({"certificate": {"certValidity": "30d"}},
     "certificate.certValidity (30d) must be longer than certificate.renewBefore (30d)"),
    ({"certificate": {"caValidity": "720h", "renewBefore": "1y"}},
     "certificate.caValidity (720h) must be longer than certificate.renewBefore (1y)"),
    ({"certificate": {"renewBefore": "0s"}},
     "certificate.renewBefore is 0s; it must be longer than zero"),
], ids=["ca-236y", "cert-100y1s", "wait-36501d", "cert-equals-renew", "ca-below-renew",
        "renew-zero"])
def test_durations_certctl_would_refuse_fail_lint_and_template(helm, override, message):
    # certctl would exit with a usage error in the hook Job; the chart says so up front.
    values = merged(MINIMAL, **override)
    lint = helm.run("lint", CHART, values=values)
    assert lint.returncode != 0, lint.stdout
    assert message in lint.stdout + lint.stderr
    template = helm.run("template", "hook", CHART, values=values)
    assert template.returncode != 0, template.stdout
    assert f"certctl: {message}" in template.stderr


def test_durations_up_to_100y_are_accepted(helm):
    values = merged(MINIMAL, certificate={"caValidity": "100y", "certValidity": "36500d",
                                          "renewBefore": "99y364d23h59m59s"},
                    job={"waitForTargets": "0s"})
    lint = helm.run("lint", "--strict", CHART, values=values)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    _, objects = helm.template(values)
    flags, _ = parse_args(container(job_for(objects, "inject"))["args"])
    assert (flags["--ca-validity"], flags["--cert-validity"], flags["--renew-before"],
            flags["--wait-for-targets"]) == (["100y"], ["36500d"], ["99y364d23h59m59s"], ["0s"])


def test_defaults_match_certctl_defaults(helm):
    with open(os.path.join(CHART, "values.yaml"), encoding="utf-8") as f:
        values = yaml.safe_load(f)
    assert values["mode"] == "sidecar"
    assert values["secretName"] == "webhook-server-cert"
    assert values["certificate"] == {
        "keyType": "ecdsa-p256", "caValidity": "10y", "certValidity": "10y",
        "renewBefore": "30d", "caOverlap": "24h", "clusterDomain": "cluster.local",
        "extraDnsNames": [],
        "ipAddresses": [], "caName": "", "caOrganization": ""}
    assert values["job"]["waitForTargets"] == "2m"
    assert values["adopt"] is False
    assert values["serviceAccount"]["create"] is True and values["rbac"]["create"] is True
    with open(os.path.join(CHART, "Chart.yaml"), encoding="utf-8") as f:
        chart = yaml.safe_load(f)
    assert (chart["apiVersion"], chart["name"], chart["version"], chart["appVersion"]) == \
        ("v2", "certctl", "0.2.0", "0.2.0")


# --- helm: hooks ----------------------------------------------------------------------


def test_hook_jobs_phases_weights_and_delete_policies(helm):
    _, objects = helm.template(MINIMAL)
    assert {obj["kind"] for obj in objects} == RBAC_KINDS | {"Job"}

    secret_job, inject_job = job_for(objects, "secret"), job_for(objects, "inject")
    assert hook_events(secret_job) == {"pre-install", "pre-upgrade"}
    assert hook_events(inject_job) == {"post-install", "post-upgrade"}
    for job in (secret_job, inject_job):
        assert annotations(job)["helm.sh/hook-delete-policy"] == \
            "before-hook-creation,hook-succeeded"
        assert annotations(job)["helm.sh/hook-weight"] == "0"
        # Not zero: a tool that applies the hooks itself (Argo CD) must see the Job finish.
        assert job["spec"]["ttlSecondsAfterFinished"] == 300

    # The ServiceAccount and RBAC are hooks of every phase in which a Job runs, with a lower
    # weight, so they exist before the Job starts. Helm deletes hook-succeeded objects only
    # once the whole phase succeeded, so they also outlive the Job.
    job_events = hook_events(secret_job) | hook_events(inject_job)
    rbac = [obj for obj in objects if obj["kind"] in RBAC_KINDS]
    assert len(rbac) == 5
    for obj in rbac:
        name = f"{obj['kind']} {obj['metadata']['name']}"
        assert hook_events(obj) >= job_events, f"{name} is missing in a hook phase"
        assert int(annotations(obj)["helm.sh/hook-weight"]) < 0, name
        policy = annotations(obj)["helm.sh/hook-delete-policy"].split(",")
        assert "before-hook-creation" in policy, name
        assert "hook-failed" not in policy, name  # a failed Job keeps its grants for retry


def test_every_object_is_labelled(helm):
    _, objects = helm.template(MINIMAL, release="rel")
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "certctl"
        assert labels["app.kubernetes.io/instance"] == "rel"
        assert labels["app.kubernetes.io/version"] == "0.2.0"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/component"]
    for job in by_kind(objects, "Job"):
        pod_labels = job["spec"]["template"]["metadata"]["labels"]
        assert pod_labels["app.kubernetes.io/instance"] == "rel"
        assert pod_labels["app.kubernetes.io/component"] == \
            job["metadata"]["labels"]["app.kubernetes.io/component"]


# --- helm: the certctl command line ---------------------------------------------------


def test_minimal_values_give_the_documented_defaults(helm):
    _, objects = helm.template(MINIMAL, namespace="infra")
    common = {"-n": ["infra"], "--secret": ["webhook-server-cert"], "--service": ["hook"],
              "--cluster-domain": ["cluster.local"], "--key-type": ["ecdsa-p256"],
              "--ca-validity": ["10y"], "--cert-validity": ["10y"], "--renew-before": ["30d"],
              "--ca-overlap": ["24h"], "--log-level": ["info"], "--log-format": ["json"]}
    flags, switches = parse_args(container(job_for(objects, "secret"))["args"])
    assert flags == {"--phase": ["secret"], **common, "--validating-webhook": ["hook"],
                     "--wait-for-targets": ["2m"]}
    assert switches == []
    flags, switches = parse_args(container(job_for(objects, "inject"))["args"])
    assert flags == {"--phase": ["inject"], **common, "--validating-webhook": ["hook"],
                     "--wait-for-targets": ["2m"]}
    assert switches == []
    assert container(job_for(objects, "secret"))["image"] == "registry.example/certctl:0.2.0"


def test_a_digest_pins_the_image_in_preference_to_the_tag(helm):
    digest = "sha256:" + "ab" * 32
    _, objects = helm.template(merged(MINIMAL, image={"tag": "9.9.9", "digest": digest}))
    for phase in ("secret", "inject"):
        assert container(job_for(objects, phase))["image"] == f"registry.example/certctl@{digest}"
    _, objects = helm.template(merged(MINIMAL, image={"tag": "9.9.9", "digest": ""}))
    assert container(job_for(objects, "secret"))["image"] == "registry.example/certctl:9.9.9"
    # Anything but a sha256 digest is refused by the schema, naming the value.
    proc = helm.run("template", "hook", CHART, values=merged(MINIMAL, image={"digest": "latest"}))
    assert proc.returncode != 0 and "image.digest" in proc.stderr, proc.stderr


def test_every_value_maps_to_its_flag(helm):
    _, objects = helm.template(FULL, namespace="certctl-system")
    certificate = {
        "-n": ["hooks"], "--secret": ["hook-tls"], "--service": ["hook"],
        "--dns-name": ["hook.example.com", "hook.internal"], "--ip": ["10.0.0.7", "fd00::7"],
        "--cluster-domain": ["corp.local"], "--key-type": ["rsa-3072"],
        "--ca-validity": ["5y"], "--cert-validity": ["1y"], "--renew-before": ["60d"],
        "--ca-overlap": ["12h"], "--ca-name": ["Hook Root CA"],
        "--ca-organization": ["Example Corp"], "--log-level": ["debug"], "--log-format": ["text"]}
    targets = {"--validating-webhook": ["hook-v1", "hook-v2"], "--mutating-webhook": ["hook-m"],
               "--crd": ["widgets.hook.io", "gadgets.hook.io"],
               "--apiservice": ["v1.metrics.hook.io"],
               "--webhook-selector": ["app=hook,tier=admission"], "--wait-for-targets": ["5m"]}

    # The secret phase gets the targets too: a pre-upgrade hook that starts a CA rotation
    # carries it through step 2 (on a first install it writes no target).
    flags, switches = parse_args(container(job_for(objects, "secret"))["args"])
    assert flags == {"--phase": ["secret"], **certificate, **targets}
    assert switches == ["--adopt"]

    flags, switches = parse_args(container(job_for(objects, "inject"))["args"])
    assert flags == {"--phase": ["inject"], **certificate, **targets}
    assert switches == ["--adopt"]

    for job in by_kind(objects, "Job"):
        spec, pod = job["spec"], job["spec"]["template"]["spec"]
        assert job["metadata"]["namespace"] == "certctl-system"
        assert (spec["backoffLimit"], spec["activeDeadlineSeconds"],
                spec["ttlSecondsAfterFinished"]) == (4, 900, 120)
        assert container(job)["image"] == "registry.example/certctl:9.9.9"
        assert container(job)["imagePullPolicy"] == "Always"
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert pod["tolerations"] == FULL["job"]["tolerations"]
        assert pod["priorityClassName"] == "system-cluster-critical"
        assert job["spec"]["template"]["metadata"]["annotations"] == \
            {"example.com/audit": "yes"}
        assert job["spec"]["template"]["metadata"]["labels"]["team"] == "platform"


def test_values_with_yaml_special_characters_stay_strings(helm):
    values = merged(MINIMAL, certificate={"caName": "yes", "caOrganization": "Acme: \"R&D\"",
                                          "extraDnsNames": ["*.hook.example.com"]},
                    targets={"validatingWebhooks": ["hook"], "webhookSelector": "app in (a,b)"})
    _, objects = helm.template(values)
    flags, _ = parse_args(container(job_for(objects, "inject"))["args"])
    assert flags["--ca-name"] == ["yes"]
    assert flags["--ca-organization"] == ['Acme: "R&D"']
    assert flags["--dns-name"] == ["*.hook.example.com"]
    assert flags["--webhook-selector"] == ["app in (a,b)"]


def test_job_pods_run_unprivileged_as_the_chart_service_account(helm):
    _, objects = helm.template(MINIMAL, release="rel")
    sa = one(objects, "ServiceAccount")
    for job in by_kind(objects, "Job"):
        assert_secure_pod(job)
        pod = job["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == sa["metadata"]["name"] == "rel-certctl"
        assert pod["automountServiceAccountToken"] is True


# --- helm: RBAC -----------------------------------------------------------------------


@pytest.mark.parametrize("targets", [
    {"validatingWebhooks": ["hook"]},
    {"mutatingWebhooks": ["hook-m"], "crds": ["widgets.hook.io"],
     "apiServices": ["v1.metrics.hook.io"]},
    FULL["targets"],
    {"webhookSelector": "app=hook"},
], ids=["validating", "crd-apiservice-mutating", "all", "selector-only"])
def test_rbac_is_least_privilege(helm, targets):
    values = {"mode": "job", "image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
              "targets": targets, "secretName": "hook-tls"}
    _, objects = helm.template(values, namespace="infra", release="hook")
    assert_no_wildcards(objects)
    sa = one(objects, "ServiceAccount")
    assert sa["metadata"]["namespace"] == "infra"

    role = one(objects, "Role")
    assert role["metadata"]["namespace"] == "infra"
    assert expanded_rules(role) == expected_namespace_rules("hook-tls")
    # Exactly one rule without resourceNames may touch secrets, and it only creates.
    unnamed = [r for r in role["rules"] if "secrets" in r["resources"]
               and not r.get("resourceNames")]
    assert [r["verbs"] for r in unnamed] == [["create"]]
    assert_bound(objects, "RoleBinding", role, sa["metadata"]["name"], "infra")

    cluster_role = one(objects, "ClusterRole")
    rules = expanded_rules(cluster_role)
    assert rules == expected_cluster_rules(targets)
    verbs = {verb for (_, _, _, verb) in rules | expanded_rules(role)}
    if not targets.get("webhookSelector"):
        assert "list" not in verbs, "list only for a webhook selector"
        assert all(name for (_, _, name, _) in rules), "every target rule is named"
    assert not verbs & {"watch", "delete", "deletecollection"}, verbs
    assert_bound(objects, "ClusterRoleBinding", cluster_role, sa["metadata"]["name"], "infra")


def test_rbac_follows_the_webhook_namespace(helm):
    values = merged(MINIMAL, webhook={"service": "hook", "namespace": "hooks"})
    _, objects = helm.template(values, namespace="certctl-system", release="hook")
    sa = one(objects, "ServiceAccount")
    assert sa["metadata"]["namespace"] == "certctl-system"
    role = one(objects, "Role")
    assert role["metadata"]["namespace"] == "hooks"  # where the Secret lives
    assert_bound(objects, "RoleBinding", role, sa["metadata"]["name"], "certctl-system")
    for job in by_kind(objects, "Job"):
        assert job["metadata"]["namespace"] == "certctl-system"
        assert parse_args(container(job)["args"])[0]["-n"] == ["hooks"]


def test_cluster_scoped_names_include_the_release_namespace(helm):
    _, a = helm.template(MINIMAL, namespace="team-a", release="hook")
    _, b = helm.template(MINIMAL, namespace="team-b", release="hook")
    for kind in ("ClusterRole", "ClusterRoleBinding"):
        assert one(a, kind)["metadata"]["name"] != one(b, kind)["metadata"]["name"]


def test_existing_service_account_and_no_rbac(helm):
    values = merged(MINIMAL, serviceAccount={"create": False, "name": "ops-certctl"})
    _, objects = helm.template(values)
    assert not by_kind(objects, "ServiceAccount")
    for binding in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding"):
        assert binding["subjects"][0]["name"] == "ops-certctl"
    for job in by_kind(objects, "Job"):
        assert job["spec"]["template"]["spec"]["serviceAccountName"] == "ops-certctl"

    _, objects = helm.template(merged(values, rbac={"create": False}))
    assert {obj["kind"] for obj in objects} == {"Job"}


# --- helm: against the emulator -------------------------------------------------------


@pytest.mark.backends("real")
def test_rendered_chart_applies(cluster, helm):
    stream, objects = helm.template(FULL, namespace="certctl-system", release="hook")
    cluster.kubectl("create", "namespace", "certctl-system")
    cluster.kubectl("create", "namespace", "hooks")
    cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=stream)
    assert cluster.kubectl("get", "jobs", "-n", "certctl-system", "-o", "name").stdout == ""
    cluster.kubectl("apply", "-f", "-", input=stream)
    for obj in objects:
        ns = obj["metadata"].get("namespace")
        args = ["get", obj["kind"].lower(), obj["metadata"]["name"], "-o", "json"]
        live = json.loads(cluster.kubectl(*args, *(["-n", ns] if ns else [])).stdout)
        assert live["metadata"]["labels"]["app.kubernetes.io/instance"] == "hook"
    # Re-applying the same manifests changes nothing.
    again = cluster.kubectl("apply", "-f", "-", input=stream).stdout
    assert all(line.endswith("unchanged") for line in again.splitlines()), again


@pytest.mark.backends("real")
def test_chart_rbac_grants_exactly_what_certctl_job_needs(cluster, helm):
    values = merged(MINIMAL, targets={"validatingWebhooks": ["hook"], "crds": ["widgets.hook.io"]})
    _, objects = helm.template(values, namespace="infra", release="hook")
    sa = one(objects, "ServiceAccount")["metadata"]["name"]
    cluster.kubectl("create", "namespace", "infra")
    user = rendered_rbac_user(cluster, objects, sa, "infra")

    allowed = [("get", "secrets/webhook-server-cert", "infra"),
               ("update", "secrets/webhook-server-cert", "infra"),
               ("create", "secrets", "infra"),
               ("get", f"{VWC}/hook", None), ("patch", f"{VWC}/hook", None),
               ("get", "customresourcedefinitions/widgets.hook.io", None),
               ("patch", "customresourcedefinitions/widgets.hook.io", None)]
    # Other objects, other namespaces, and the verbs the job never uses: it writes the
    # Secret with update (PUT), patches its targets, never watches and records no events.
    denied = [("get", "secrets/other", "infra"), ("list", "secrets", "infra"),
              ("delete", "secrets/webhook-server-cert", "infra"),
              ("patch", "secrets/webhook-server-cert", "infra"),
              ("create", "secrets", "default"), ("get", "secrets/webhook-server-cert", "default"),
              ("create", "events", "infra"),
              ("patch", f"{VWC}/other", None), ("list", VWC, None), ("watch", VWC, None),
              ("update", f"{VWC}/hook", None),
              ("delete", f"{VWC}/hook", None), ("patch", f"{MWC}/hook", None),
              ("update", "customresourcedefinitions/widgets.hook.io", None),
              ("patch", "customresourcedefinitions/other.hook.io", None),
              ("patch", "apiservices/v1.metrics.hook.io", None)]
    for verb, resource, ns in allowed:
        assert can_i(cluster, user, verb, resource, ns), f"cannot {verb} {resource}"
    for verb, resource, ns in denied:
        assert not can_i(cluster, user, verb, resource, ns), f"may {verb} {resource}"


def test_notes_render_in_a_client_dry_run(cluster, helm):
    # A client-side dry run renders NOTES.txt (helm template does not); it only reads the
    # server's version and discovery, so nothing is written.
    cluster.reset_request_log()
    values = merged(MINIMAL, targets={"validatingWebhooks": ["hook"], "crds": ["widgets.hook.io"],
                                      "webhookSelector": "app=hook"})
    proc = helm.run("install", "hook", CHART, "--namespace", "infra", "--dry-run=client",
                    "--kubeconfig", cluster.kubeconfig(), values=values)
    assert proc.returncode == 0, proc.stderr
    notes = proc.stdout[proc.stdout.index("NOTES:"):]
    assert "Job hook-certctl-secret: certctl job --phase secret" in notes
    assert "Secret infra/webhook-server-cert" in notes
    assert ("certctl check -n infra --secret webhook-server-cert --service hook "
            "--validating-webhook hook --crd widgets.hook.io --webhook-selector 'app=hook'"
            ) in notes
    assert cluster.writes() == []


# --- examples (kustomize) -------------------------------------------------------------


def test_examples_render_offline_with_kubectl_kustomize():
    _, objects = kustomize(EXAMPLES)
    assert sorted(obj["kind"] for obj in objects) == sorted(RBAC_KINDS | {"Job"})
    for obj in objects:
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == "example-system", obj["metadata"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "certctl"

    job = one(objects, "Job")
    assert certctl_images(objects) == [("Job", "certctl", TEST_IMAGE)]
    flags, switches = parse_args(container(job)["args"])
    assert flags["--phase"] == ["all"]
    assert flags["--service"] == ["example-webhook"]
    assert flags["--validating-webhook"] == ["example-webhook"]
    assert flags["--secret"] == ["webhook-server-cert"]
    assert "-n" not in flags  # the namespace comes from POD_NAMESPACE
    assert {"name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in \
        container(job)["env"]
    assert_secure_pod(job)

    sa = one(objects, "ServiceAccount")["metadata"]["name"]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == sa
    assert_no_wildcards(objects)
    role, cluster_role = one(objects, "Role"), one(objects, "ClusterRole")
    assert expanded_rules(role) == expected_namespace_rules("webhook-server-cert")
    assert expanded_rules(cluster_role) == \
        expected_cluster_rules({"validatingWebhooks": ["example-webhook"]})
    assert_bound(objects, "RoleBinding", role, sa, "example-system")
    assert_bound(objects, "ClusterRoleBinding", cluster_role, sa, "example-system")


def test_examples_change_namespace_in_one_place(tmp_path):
    copy_dir = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy_dir)
    assert name_image(copy_dir) >= 3
    kustomization = copy_dir / "kustomization.yaml"
    text = kustomization.read_text(encoding="utf-8")
    assert text.count("namespace: example-system") == 1
    kustomization.write_text(text.replace("namespace: example-system", "namespace: team-x"),
                             encoding="utf-8")
    stream, objects = kustomize(str(copy_dir))
    assert "example-system" not in stream
    for binding in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding"):
        assert binding["subjects"][0]["namespace"] == "team-x"


@pytest.mark.backends("real")
def test_without_an_image_kubectl_apply_stops_naming_where_to_set_it(cluster):
    """`kubectl apply -k` of each example before certctl's image is set (no public image
    exists): kustomize stops before anything is sent, naming the field and the ConfigMap it
    goes in, where a commented line shows how; nothing is created. Set as that line shows,
    the example renders with the image."""
    config_maps = {EXAMPLES: "certctl-image",
                   os.path.join(EXAMPLES, "audit"): "certctl-image",
                   os.path.join(EXAMPLES, "sidecar"): "certctl-image",
                   os.path.join(EXAMPLES, "kustomize-component", "with-certctl"):
                       "certctl-sidecar"}
    kinds = "all,serviceaccounts,roles,rolebindings,clusterroles,clusterrolebindings," \
        "validatingwebhookconfigurations"
    before = cluster.kubectl("get", kinds, "-A", "-o", "name").stdout
    for folder, config_map in config_maps.items():
        where = f"{MISSING} ConfigMap.[noVer].[noGrp]/{config_map}."
        offline = run_kustomize(folder)
        assert offline.returncode != 0 and where in offline.stderr, offline.stderr
        proc = cluster.kubectl("apply", "-k", folder, check=False)
        assert proc.returncode != 0 and proc.stdout == "", proc.stdout
        assert where in proc.stderr, proc.stderr
        _, objects = kustomize(folder)
        assert [image for _, _, image in certctl_images(objects)] == [TEST_IMAGE], folder
    assert cluster.kubectl("get", kinds, "-A", "-o", "name").stdout == before


@pytest.mark.backends("real")
def test_examples_apply(cluster):
    stream, objects = kustomize(EXAMPLES)
    cluster.kubectl("create", "namespace", "example-system")
    cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=stream)
    cluster.kubectl("apply", "-f", "-", input=stream)
    job = json.loads(cluster.kubectl("get", "job", "certctl", "-n", "example-system",
                                     "-o", "json").stdout)
    assert container(job)["args"] == container(one(objects, "Job"))["args"]

    sa = one(objects, "ServiceAccount")["metadata"]["name"]
    user = rendered_rbac_user(cluster, objects, sa, "example-system")
    assert can_i(cluster, user, "create", "secrets", "example-system")
    assert can_i(cluster, user, "update", "secrets/webhook-server-cert", "example-system")
    assert can_i(cluster, user, "patch", f"{VWC}/example-webhook")
    assert not can_i(cluster, user, "get", "secrets/other", "example-system")
    assert not can_i(cluster, user, "patch", f"{VWC}/other")
    assert not can_i(cluster, user, "list", VWC)


# --- scripts/install-helm.sh ------------------------------------------------------------


def test_install_helm_is_quiet_when_helm_is_there(helm):
    proc = subprocess.run([INSTALL_HELM], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PATH=f"{os.path.dirname(helm.path)}:"
                                                    f"{os.environ.get('PATH', '')}"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
