"""The chart's mode `sidecar` (manifests/helm/certctl): the webhook's Deployment with
`certctl run` as a native sidecar, its Service, and certctl's least-privilege RBAC.

Offline, `helm lint` and `helm template`: the native sidecar's shape (an init container with
restartPolicy Always, a startupProbe that holds the webhook container back, readiness and
liveness probes, the shared in-memory folder, the token for certctl alone), its hardened
securityContext, every value on its flag, leader election by replica count, the rendered
RBAC equal to the permission table, values certctl would refuse, and the named templates
that put the sidecar into another chart's Deployment.

Against the emulator: the rendered chart applied, then the sidecar container run as a local
process the way a kubelet would run it (harness.kubelet.pod_container): exactly the
container's args, only --cert-dir moved to a temp folder and the health and metrics
addresses to free ports, as the chart's service account with exactly the RBAC the chart
stored in the emulator. Its probes answer, the Secret, the folder, the caBundles, the Events
and (with leader election) the Lease are there, nothing was refused, and a caBundle blanked
with kubectl is repaired.
"""

import base64
import copy
import json
import re
import shutil
import signal
import subprocess
import time

import pytest
import yaml

from harness.certctl import api_service, assert_contains, crd, webhook_configuration
from harness.helm import CERTCTL_IMAGE, Helm, by_kind, find_helm, merged, one
from harness.kubelet import free_ports, pod_container, rewrite_flags
from harness.sidecar import WEBHOOK_SERVER
from harness.rbac import CHART, emulator_rules, policy_rules
from kubeemu.kinds import default_pod_template

NS = "infra"
RELEASE = "rel"
SA = f"{RELEASE}-certctl"
USER = f"system:serviceaccount:{NS}:{SA}"
SECRET = "webhook-server-cert"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"

# `certctl run` flags: flag -> whether it takes a value.
RUN_FLAGS = {
    "-n": True, "--secret": True, "--service": True, "--dns-name": True, "--ip": True,
    "--cluster-domain": True, "--key-type": True, "--ca-validity": True,
    "--cert-validity": True, "--renew-before": True, "--ca-overlap": True, "--ca-name": True,
    "--ca-organization": True, "--adopt": False, "--validating-webhook": True,
    "--mutating-webhook": True, "--crd": True, "--apiservice": True,
    "--webhook-selector": True, "--cert-dir": True, "--health-addr": True,
    "--metrics-addr": True, "--resync": True, "--leader-elect": False, "--lease-name": True,
    "--lease-duration": True, "--lease-renew-deadline": True, "--lease-retry-period": True,
    "--serving-addr": True, "--log-level": True, "--log-format": True,
}
REPEATABLE = {"--dns-name", "--ip", "--validating-webhook", "--mutating-webhook", "--crd",
              "--apiservice"}

IMAGE = {"repository": "registry.example/hook", "tag": "1.2.3"}
MINIMAL = {"image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
           "targets": {"validatingWebhooks": ["hook"]}, "sidecar": {"webhook": {"image": IMAGE}}}

POLL = 0.05
BOUND = 20.0
REPAIR_BOUND = 5.0


# --- tools ---------------------------------------------------------------------------------


class ChartHelm(Helm):
    def template(self, values, namespace=NS, release=RELEASE, chart=CHART):
        proc = self.run("template", release, chart, "--namespace", namespace, values=values)
        assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
        return proc.stdout, [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


@pytest.fixture(scope="module")
def helm(tmp_path_factory):
    return ChartHelm(find_helm(), tmp_path_factory.mktemp("helm"))


def pod_spec(objects):
    return one(objects, "Deployment")["spec"]["template"]["spec"]


def sidecar(objects):
    """The certctl init container; it must be the only init container."""
    init = pod_spec(objects)["initContainers"]
    assert [c["name"] for c in init] == ["certctl"]
    return init[0]


def webhook_container(objects):
    containers = pod_spec(objects)["containers"]
    assert len(containers) == 1, [c["name"] for c in containers]
    return containers[0]


def parse_run_args(args):
    """certctl run args -> ({flag: [values]}, [switches]); fails on anything unknown."""
    assert args[0] == "run", args
    assert all(isinstance(a, str) for a in args), f"every argument must be a string: {args}"
    flags, switches, i = {}, [], 1
    while i < len(args):
        flag = args[i]
        assert flag in RUN_FLAGS, f"unknown certctl run flag {flag!r} in {args}"
        if RUN_FLAGS[flag]:
            assert i + 1 < len(args), f"{flag} needs a value: {args}"
            flags.setdefault(flag, []).append(args[i + 1])
            i += 2
        else:
            switches.append(flag)
            i += 1
    for flag, got in flags.items():
        assert len(got) == 1 or flag in REPEATABLE, f"{flag} given {len(got)} times: {args}"
    return flags, switches


def mounts(container):
    return {m["name"]: m for m in container.get("volumeMounts") or []}


def volumes(objects):
    return {v["name"]: v for v in pod_spec(objects).get("volumes") or []}


def port_number(container, name):
    [port] = [p["containerPort"] for p in container["ports"] if p["name"] == name]
    return port


# --- offline: shape --------------------------------------------------------------------------


def test_sidecar_is_the_default_mode_and_lints(helm):
    lint = helm.run("lint", "--strict", CHART, "--namespace", NS, values=MINIMAL)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    _, objects = helm.template(MINIMAL)
    kinds = sorted(obj["kind"] for obj in objects)
    assert kinds == sorted(["ServiceAccount", "Role", "Role", "RoleBinding", "RoleBinding",
                            "ClusterRole", "ClusterRoleBinding", "Service", "Deployment"])
    for obj in objects:
        # Release objects, not hooks: they live as long as the webhook's Deployment.
        assert not any(key.startswith("helm.sh/hook")
                       for key in (obj["metadata"].get("annotations") or {})), obj["metadata"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


@pytest.mark.backends("real")
def test_native_sidecar_holds_the_webhook_back_until_its_certificate_is_ready(helm):
    _, objects = helm.template(MINIMAL)
    deployment, service = one(objects, "Deployment"), one(objects, "Service")
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == "hook"
    assert deployment["metadata"]["namespace"] == service["metadata"]["namespace"] == NS
    assert deployment["spec"]["replicas"] == 1
    pod = pod_spec(objects)
    certctl, webhook = sidecar(objects), webhook_container(objects)

    # A native sidecar: an init container that keeps running.
    assert certctl["restartPolicy"] == "Always"
    assert certctl["image"] == "registry.example/certctl:0.2.0"
    flags, switches = parse_run_args(certctl["args"])
    assert switches == []
    assert flags == {
        "-n": [NS], "--secret": [SECRET], "--service": ["hook"],
        "--cluster-domain": ["cluster.local"], "--key-type": ["ecdsa-p256"],
        "--ca-validity": ["10y"], "--cert-validity": ["10y"], "--renew-before": ["30d"],
        "--ca-overlap": ["24h"], "--validating-webhook": ["hook"], "--cert-dir": ["/tls"], "--health-addr": [":8081"],
        "--metrics-addr": [":8080"], "--resync": ["1h"], "--log-level": ["info"],
        "--log-format": ["json"],
        # The serving check, on by default: the chart knows the webhook's port.
        "--serving-addr": ["127.0.0.1:9443"]}
    assert port_number(webhook, "https") == 9443
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} \
        in certctl["env"]
    assert {"name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in certctl["env"]
    assert port_number(certctl, "health") == 8081
    assert port_number(certctl, "metrics") == 8080

    # The kubelet starts the webhook container once the startupProbe passed: certificate
    # in the folder, every caBundle right.
    # A target entry calling a name the certificate lacks holds the start back, but does not
    # take a running webhook out of its Service (readinessProbe without `callable`).
    # The startupProbe leaves the serving check out: the webhook container it holds back is
    # what the check shakes hands with.
    for probe, path in (("startupProbe", "/readyz?exclude=serving"),
                        ("readinessProbe", "/readyz?exclude=callable&exclude=injected"),
                        ("livenessProbe", "/healthz")):
        assert certctl[probe]["httpGet"] == {"path": path, "port": "health"}, probe
    assert certctl["startupProbe"]["periodSeconds"] * \
        certctl["startupProbe"]["failureThreshold"] >= 120, "room for a late target"

    # One folder, written by certctl (--cert-dir), read-only for the webhook, same path.
    cert_volume = volumes(objects)["certctl-certs"]
    assert cert_volume["emptyDir"]["medium"] == "Memory", "the key stays off the disk"
    assert mounts(certctl)["certctl-certs"]["mountPath"] == flags["--cert-dir"][0] == "/tls"
    assert not mounts(certctl)["certctl-certs"].get("readOnly")
    assert mounts(webhook)["certctl-certs"] == {"name": "certctl-certs", "mountPath": "/tls",
                                                "readOnly": True}

    # The token: certctl's container only.
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    token = volumes(objects)["certctl-token"]["projected"]["sources"]
    assert {"serviceAccountToken"} <= {key for source in token for key in source}
    assert mounts(certctl)["certctl-token"] == {"name": "certctl-token",
                                                "mountPath": TOKEN_PATH, "readOnly": True}
    assert all(m["mountPath"] != TOKEN_PATH for m in mounts(webhook).values())

    # The webhook server and its Service.
    assert webhook["image"] == "registry.example/hook:1.2.3"
    assert port_number(webhook, "https") == 9443
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https",
                                         "protocol": "TCP"}]


def test_helm_test_runs_certctl_check_with_the_releases_names_in_mode_sidecar(helm,
                                                                              certctl_binary):
    values = merged(MINIMAL, certificate={"extraDnsNames": ["hook.example.com"]},
                    targets={"mutatingWebhooks": ["hook-m"]})
    proc = helm.run("template", RELEASE, CHART, "--namespace", NS, values=values, tests=True)
    assert proc.returncode == 0, proc.stderr
    (pod,) = [doc for doc in yaml.safe_load_all(proc.stdout) if doc and doc["kind"] == "Pod"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is True
    assert spec["serviceAccountName"] == f"{RELEASE}-certctl"
    (container,) = spec["containers"]
    assert container["image"] == "registry.example/certctl:0.2.0"
    args = container["args"]
    assert args[0] == "check"
    flags = dict(zip(args[1::2], args[2::2]))
    assert flags["-n"] == NS and flags["--secret"] == SECRET and flags["--service"] == "hook"
    assert flags["--dns-name"] == "hook.example.com"
    assert flags["--validating-webhook"] == "hook" and flags["--mutating-webhook"] == "hook-m"
    # Every flag is one `certctl check` accepts (its own, or certctl's global ones).
    known = "".join(subprocess.run([certctl_binary, *command, "--help"], capture_output=True,
                                   text=True).stdout for command in ([], ["check"]))
    for flag in args[1::2]:
        assert re.search(rf"(^|\s){re.escape(flag)}[\s,]", known), flag

    # Mode job: the service account is a hook, gone when `helm test` runs; off: none.
    for off in (merged(values, mode="job"), merged(values, tests={"enabled": False})):
        proc = helm.run("template", RELEASE, CHART, "--namespace", NS, values=off, tests=True)
        assert proc.returncode == 0, proc.stderr
        assert "kind: Pod" not in proc.stdout


def test_certctl_runs_unprivileged(helm):
    _, objects = helm.template(MINIMAL)
    pod, certctl = pod_spec(objects), sidecar(objects)
    sc = certctl["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert isinstance(sc["runAsUser"], int) and sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc.get("privileged") is not True
    assert "memory" in certctl["resources"]["limits"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # tls.key is 0600 and certctl's: the webhook container runs as the same user.
    assert pod["securityContext"]["runAsUser"] == sc["runAsUser"]
    assert "runAsUser" not in (webhook_container(objects).get("securityContext") or {})
    assert pod.get("hostNetwork") is not True and pod.get("hostPID") is not True


def test_every_sidecar_value_maps_to_its_flag_or_field(helm):
    values = merged(MINIMAL, **{
        "image": {"repository": "registry.example/certctl", "tag": "9.9.9",
                  "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "regcred"}],
        "webhook": {"service": "hook", "namespace": "hooks"},
        "secretName": "hook-tls",
        "targets": {"validatingWebhooks": ["hook-v"], "mutatingWebhooks": ["hook-m"],
                    "crds": ["widgets.hook.io"], "apiServices": ["v1.metrics.hook.io"],
                    "webhookSelector": "app=hook"},
        "certificate": {"keyType": "rsa-3072", "caValidity": "5y", "certValidity": "1y",
                        "renewBefore": "60d", "clusterDomain": "corp.local",
                        "extraDnsNames": ["hook.example.com"], "ipAddresses": ["10.0.0.7"],
                        "caName": "Hook CA", "caOrganization": "Example"},
        "adopt": True, "logLevel": "debug", "logFormat": "text",
        "sidecar": {
            "replicas": 3, "leaseName": "hook-lease", "leaseDuration": "30s",
            "leaseRenewDeadline": "20s", "leaseRetryPeriod": "5s", "resync": "15m",
            "servingAddr": "127.0.0.1:8443", "certDir": "/etc/hook/tls", "healthPort": 9081,
            "metricsPort": 9080,
            "startupProbe": {"periodSeconds": 2, "failureThreshold": 60},
            "resources": {"limits": {"memory": "64Mi"}},
            "webhook": {"name": "server", "command": ["/server"], "args": ["--port=8443"],
                        "port": 8443, "env": [{"name": "MODE", "value": "strict"}],
                        "resources": {"limits": {"memory": "1Gi"}},
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": "https",
                                                       "scheme": "HTTPS"}},
                        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                        "volumeMounts": [{"name": "config", "mountPath": "/config"}],
                        "serviceAccountToken": True},
            "service": {"port": 8443},
            "volumes": [{"name": "config", "configMap": {"name": "hook-config"}}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "infra", "operator": "Exists"}],
            "priorityClassName": "system-cluster-critical",
            "podAnnotations": {"example.com/audit": "yes"}, "podLabels": {"team": "platform"},
        }})
    _, objects = helm.template(values, namespace="certctl-system")
    certctl, webhook = sidecar(objects), webhook_container(objects)
    flags, switches = parse_run_args(certctl["args"])
    assert flags == {
        "-n": ["hooks"], "--secret": ["hook-tls"], "--service": ["hook"],
        "--dns-name": ["hook.example.com"], "--ip": ["10.0.0.7"],
        "--cluster-domain": ["corp.local"], "--key-type": ["rsa-3072"],
        "--ca-validity": ["5y"], "--cert-validity": ["1y"], "--renew-before": ["60d"],
        "--ca-overlap": ["24h"], "--ca-name": ["Hook CA"], "--ca-organization": ["Example"],
        "--validating-webhook": ["hook-v"], "--mutating-webhook": ["hook-m"],
        "--crd": ["widgets.hook.io"], "--apiservice": ["v1.metrics.hook.io"],
        "--webhook-selector": ["app=hook"], "--cert-dir": ["/etc/hook/tls"],
        "--health-addr": [":9081"], "--metrics-addr": [":9080"], "--resync": ["15m"],
        "--lease-name": ["hook-lease"], "--lease-duration": ["30s"],
        "--lease-renew-deadline": ["20s"], "--lease-retry-period": ["5s"],
        "--serving-addr": ["127.0.0.1:8443"],
        "--log-level": ["debug"], "--log-format": ["text"]}
    assert sorted(switches) == ["--adopt", "--leader-elect"]  # 3 replicas: elect
    assert certctl["image"] == "registry.example/certctl:9.9.9"
    assert certctl["imagePullPolicy"] == "Always"
    assert (port_number(certctl, "health"), port_number(certctl, "metrics")) == (9081, 9080)
    # servingAddr: the startupProbe leaves the `serving` check out, since it cannot pass
    # before the webhook container (which waits for this probe) runs; readiness keeps it.
    assert certctl["startupProbe"]["httpGet"]["path"] == "/readyz?exclude=serving"
    assert (certctl["startupProbe"]["periodSeconds"],
            certctl["startupProbe"]["failureThreshold"]) == (2, 60)
    assert certctl["readinessProbe"]["httpGet"]["path"] == "/readyz?exclude=callable&exclude=injected"
    assert certctl["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # Helm merges maps: the default requests stay.
    assert certctl["resources"] == {"requests": {"cpu": "10m", "memory": "32Mi"},
                                    "limits": {"memory": "64Mi"}}
    assert mounts(certctl)["certctl-certs"]["mountPath"] == "/etc/hook/tls"

    assert webhook["name"] == "server"
    assert (webhook["command"], webhook["args"]) == (["/server"], ["--port=8443"])
    assert webhook["env"] == [{"name": "MODE", "value": "strict"}]
    assert webhook["resources"] == {"limits": {"memory": "1Gi"}}
    assert webhook["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert webhook["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert port_number(webhook, "https") == 8443
    assert mounts(webhook)["certctl-certs"]["mountPath"] == "/etc/hook/tls"
    assert mounts(webhook)["config"] == {"name": "config", "mountPath": "/config"}
    assert mounts(webhook)["certctl-token"] == {"name": "certctl-token",
                                                "mountPath": TOKEN_PATH, "readOnly": True}
    assert volumes(objects)["config"] == {"name": "config", "configMap": {"name": "hook-config"}}

    deployment, pod = one(objects, "Deployment"), pod_spec(objects)
    assert deployment["metadata"]["namespace"] == "hooks"  # with its Service and Secret
    assert deployment["spec"]["replicas"] == 3
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == [{"key": "infra", "operator": "Exists"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    template = deployment["spec"]["template"]["metadata"]
    assert template["annotations"] == {"example.com/audit": "yes"}
    assert template["labels"]["team"] == "platform"
    assert one(objects, "Service")["spec"]["ports"][0]["port"] == 8443
    assert one(objects, "ServiceAccount")["metadata"]["namespace"] == "hooks"


@pytest.mark.parametrize("replicas, leader_election, elects", [
    (1, None, False), (2, None, True), (3, False, False), (1, True, True)],
    ids=["1-replica", "2-replicas", "3-replicas-off", "1-replica-on"])
def test_leader_election_follows_the_replicas_unless_set(helm, replicas, leader_election,
                                                         elects):
    values = merged(MINIMAL, sidecar={"replicas": replicas})
    if leader_election is not None:
        values["sidecar"]["leaderElection"] = leader_election
    _, objects = helm.template(values)
    flags, switches = parse_run_args(sidecar(objects)["args"])
    assert ("--leader-elect" in switches) == elects
    assert flags.get("--lease-name") == ([f"{SECRET}-certctl"] if elects else None)
    role = next(r for r in by_kind(objects, "Role") if r["metadata"]["namespace"] == NS)
    assert any("leases" in rule["resources"] for rule in role["rules"]) == elects


@pytest.mark.parametrize("targets, sidecar_values, webhook_namespace", [
    ({"validatingWebhooks": ["hook"]}, {}, None),
    ({"validatingWebhooks": ["hook-a", "hook-b"], "mutatingWebhooks": ["hook-m"],
      "crds": ["widgets.hook.io"], "apiServices": ["v1.metrics.hook.io"]},
     {"replicas": 2, "leaseName": "hook-lease"}, "hooks"),
    ({"webhookSelector": "app=hook"}, {"leaderElection": True}, None),
], ids=["one-target", "every-kind-leader-election-foreign-namespace", "selector"])
def test_rendered_rbac_is_the_table(helm, targets, sidecar_values, webhook_namespace):
    values = merged(MINIMAL, targets=targets, sidecar=sidecar_values, secretName="hook-tls")
    values["targets"] = targets
    if webhook_namespace:
        values["webhook"]["namespace"] = webhook_namespace
    _, objects = helm.template(values)
    expected = policy_rules("sidecar", "hook-tls", targets, sidecar_values)
    ns = webhook_namespace or NS
    roles = {role["metadata"]["namespace"]: role for role in by_kind(objects, "Role")}
    assert set(roles) == {ns, "default"}
    assert roles[ns]["rules"] == expected["namespace"]
    assert roles["default"]["rules"] == expected["default"]
    assert one(objects, "ClusterRole")["rules"] == expected["cluster"]
    sa = one(objects, "ServiceAccount")["metadata"]
    assert sa["namespace"] == ns  # the pods' namespace
    for binding in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"],
                                        "namespace": ns}]
    for binding in by_kind(objects, "RoleBinding"):
        role = roles[binding["metadata"]["namespace"]]
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
    for role in by_kind(objects, "Role") + by_kind(objects, "ClusterRole"):
        for rule in role["rules"]:
            assert not any("*" in item for field in ("apiGroups", "resources", "verbs")
                           for item in rule[field]), rule
            if "secrets" in rule["resources"] and not rule.get("resourceNames"):
                assert rule["verbs"] == ["create"], rule
    # The default namespace's Role carries the release namespace: releases of every
    # namespace meet there.
    assert roles["default"]["metadata"]["name"] == f"{RELEASE}-certctl-{NS}-events"


def test_no_rbac_and_an_existing_service_account(helm):
    values = merged(MINIMAL, serviceAccount={"create": False, "name": "hook-sa"},
                    rbac={"create": False})
    _, objects = helm.template(values)
    assert sorted(obj["kind"] for obj in objects) == ["Deployment", "Service"]
    assert pod_spec(objects)["serviceAccountName"] == "hook-sa"


@pytest.mark.parametrize("override, message", [
    ({"sidecar": {"webhook": {"image": {"repository": ""}}}},
     "sidecar.webhook.image.repository is required"),
    ({"sidecar": {"metricsPort": 8081}},
     "sidecar.healthPort and sidecar.metricsPort are both 8081"),
    ({"sidecar": {"webhook": {"port": 8080}}},
     "sidecar.webhook.port 8080 is also certctl's sidecar.healthPort or sidecar.metricsPort"),
    ({"sidecar": {"resync": "0s"}}, "sidecar.resync is 0s; it must be longer than zero"),
    ({"sidecar": {"resync": "101y"}}, "sidecar.resync is 101y, longer than the maximum of 100y"),
    ({"sidecar": {"leaseRetryPeriod": "0s"}},
     "sidecar.leaseRetryPeriod is 0s; it must be longer than zero"),
    ({"sidecar": {"leaseDuration": "8s"}},
     "sidecar.leaseRenewDeadline (10s) must be less than sidecar.leaseDuration (8s)"),
    ({"sidecar": {"leaseRenewDeadline": "6s", "leaseRetryPeriod": "5s"}},
     "sidecar.leaseRenewDeadline (6s) must be more than 1.2 times sidecar.leaseRetryPeriod (5s)"),
    ({"serviceAccount": {"create": False}},
     "serviceAccount.name is required when serviceAccount.create is false (an existing "
     "ServiceAccount for the webhook's pods)"),
    ({"sidecar": {"servingAddr": "127.0.0.1:9444"}},
     'sidecar.servingAddr "127.0.0.1:9444" is not the webhook\'s port sidecar.webhook.port '
     "9443"),
    ({"sidecar": {"webhook": {"port": 8443}, "servingAddr": "[::1]:9443"}},
     'sidecar.servingAddr "[::1]:9443" is not the webhook\'s port sidecar.webhook.port 8443'),
    ({"sidecar": {"webhook": {"securityContext": {"runAsUser": 1000}}}},
     "the webhook container runs as user 1000 and certctl as user 65532; tls.key (mode "
     "0600) belongs to certctl's user, so the webhook could not read it"),
    ({"sidecar": {"securityContext": {"runAsUser": 0}}},
     "the webhook container runs as user 65532 and certctl as user 0"),
], ids=["no-image", "same-ports", "webhook-port", "resync-zero", "resync-101y",
        "lease-retry-zero", "lease-below-deadline", "deadline-below-retries", "sa",
        "serving-port", "serving-port-v6", "webhook-user", "certctl-user"])
def test_values_certctl_would_refuse_fail_lint_and_template(helm, override, message):
    values = merged(MINIMAL, **override)
    lint = helm.run("lint", CHART, values=values)
    assert lint.returncode != 0, lint.stdout
    assert message in lint.stdout + lint.stderr
    template = helm.run("template", "hook", CHART, values=values)
    assert template.returncode != 0, template.stdout
    assert f"certctl: {message}" in template.stderr


def test_the_serving_check_follows_the_webhook_port_and_can_be_turned_off(helm):
    def serving(values):
        _, objects = helm.template(values)
        flags = parse_run_args(sidecar(objects)["args"])[0]
        return flags.get("--serving-addr"), sidecar(objects)["startupProbe"]["httpGet"]["path"]

    assert serving(merged(MINIMAL, sidecar={"webhook": {"image": IMAGE, "port": 8443}})) == \
        (["127.0.0.1:8443"], "/readyz?exclude=serving")
    assert serving(merged(MINIMAL, sidecar={"servingAddr": "localhost:9443"})) == \
        (["localhost:9443"], "/readyz?exclude=serving")
    assert serving(merged(MINIMAL, sidecar={"servingAddr": ""})) == (None, "/readyz")


def test_one_user_for_both_containers_is_accepted_wherever_it_is_set(helm):
    values = merged(MINIMAL, sidecar={"podSecurityContext": {"runAsUser": 1000},
                                      "securityContext": {"runAsUser": 1000},
                                      "webhook": {"image": IMAGE,
                                                  "securityContext": {"runAsUser": 1000}}})
    proc = helm.run("template", "hook", CHART, values=values)
    assert proc.returncode == 0, proc.stderr


def test_the_webhooks_objects_are_labelled_as_the_webhook_and_certctls_as_certctl(helm):
    _, objects = helm.template(MINIMAL)
    webhook_objects = [one(objects, "Deployment"), one(objects, "Service")]
    for obj in webhook_objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "hook", labels
        assert labels["app.kubernetes.io/component"] == "webhook"
        assert labels["app.kubernetes.io/instance"] == RELEASE
    deployment = one(objects, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "hook", "app.kubernetes.io/instance": RELEASE,
                        "app.kubernetes.io/component": "webhook"}
    assert one(objects, "Service")["spec"]["selector"] == selector
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    # A selector for certctl finds certctl's own objects, never the webhook's.
    for obj in objects:
        if obj not in webhook_objects:
            assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "certctl", obj


@pytest.mark.parametrize("override, field", [
    ({"sidecar": {"leaderElection": "yes"}}, "leaderElection"),
    ({"sidecar": {"servingAddr": "9443"}}, "servingAddr"),
    ({"sidecar": {"certDir": "tls"}}, "certDir"),
    ({"sidecar": {"replicas": 0}}, "replicas"),
    ({"sidecar": {"healthPort": 70000}}, "healthPort"),
    ({"sidecar": {"startupProbe": {"path": "/x"}}}, "startupProbe"),
    ({"sidecar": {"replica": 2}}, "replica"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_schema_rejects_bad_sidecar_values(helm, override, field):
    proc = helm.run("template", "hook", CHART, values=merged(MINIMAL, **override))
    assert proc.returncode != 0, f"accepted {override}"
    assert "schema" in proc.stderr and field in proc.stderr, proc.stderr


def test_clusters_without_native_sidecars_are_refused(helm):
    # Before 1.29 the API server drops an init container's restartPolicy: certctl run would
    # be an init container that never ends, and the webhook would never start.
    old = helm.run("template", "hook", CHART, "--kube-version", "1.28.9", values=MINIMAL)
    assert old.returncode != 0
    assert "certctl: mode sidecar runs certctl as a native sidecar" in old.stderr
    assert "this cluster is v1.28.9" in old.stderr
    assert helm.run("template", "hook", CHART, "--kube-version", "1.29.0",
                    values=MINIMAL).returncode == 0
    job = helm.run("template", "hook", CHART, "--kube-version", "1.28.9",
                   values=merged(MINIMAL, mode="job"))
    assert job.returncode == 0, job.stderr


def rendered_lifecycle(helm, kube_version, **webhook):
    values = merged(MINIMAL, sidecar={"webhook": webhook}) if webhook else MINIMAL
    proc = helm.run("template", "hook", CHART, "--kube-version", kube_version, values=values)
    assert proc.returncode == 0, proc.stderr
    objects = [o for o in yaml.safe_load_all(proc.stdout) if o]
    return webhook_container(objects).get("lifecycle")


def test_the_webhook_pauses_in_prestop_by_default_where_the_cluster_has_sleep(helm):
    # A stopping pod still gets the calls already on their way; the sleep action exists
    # from 1.30, and before it the API server refuses a Deployment that names it.
    assert rendered_lifecycle(helm, "1.30.0") == {"preStop": {"sleep": {"seconds": 5}}}
    assert rendered_lifecycle(helm, "1.37.2") == {"preStop": {"sleep": {"seconds": 5}}}
    assert rendered_lifecycle(helm, "1.29.4") is None
    assert rendered_lifecycle(helm, "1.32.0", preStopSleepSeconds=0) is None
    assert rendered_lifecycle(helm, "1.32.0", preStopSleepSeconds=12) == {
        "preStop": {"sleep": {"seconds": 12}}}
    # A preStop of the user's own wins; other hooks get the pause beside them.
    own = {"preStop": {"exec": {"command": ["sleep", "3"]}}}
    assert rendered_lifecycle(helm, "1.29.4", lifecycle=own) == own
    assert rendered_lifecycle(helm, "1.32.0", lifecycle=own) == own
    start = {"postStart": {"exec": {"command": ["true"]}}}
    assert rendered_lifecycle(helm, "1.32.0", lifecycle=start) == {
        **start, "preStop": {"sleep": {"seconds": 5}}}
    # Beyond the pod's 30 s of grace the webhook would be killed mid-pause.
    for bad in (-1, 26, "5"):
        proc = helm.run("template", "hook", CHART,
                        values=merged(MINIMAL, sidecar={"webhook": {"preStopSleepSeconds": bad}}))
        assert proc.returncode != 0 and "preStopSleepSeconds" in proc.stderr, bad


def test_extra_flags_and_environment_reach_certctl_in_both_modes(helm):
    extra = {"extraArgs": ["--kube-api-qps=20"],
             "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}]}
    _, objects = helm.template(merged(MINIMAL, **extra))
    certctl = sidecar(objects)
    assert certctl["args"][-1] == "--kube-api-qps=20"
    assert certctl["env"][-1] == extra["extraEnv"][0]
    assert {"POD_NAME", "POD_NAMESPACE"} <= {e["name"] for e in certctl["env"]}
    _, objects = helm.template(merged(MINIMAL, mode="job", **extra))
    jobs = [o for o in objects if o["kind"] == "Job"]
    assert len(jobs) == 2
    for job in jobs:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["args"][-1] == "--kube-api-qps=20", job["metadata"]["name"]
        assert container["env"] == extra["extraEnv"]
    _, objects = helm.template(merged(MINIMAL, mode="job"))
    assert all("env" not in o["spec"]["template"]["spec"]["containers"][0]
               for o in objects if o["kind"] == "Job")


def test_topology_spread_and_a_budget_that_does_not_block_drains(helm):
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
               "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "hook"}}}]
    _, objects = helm.template(merged(MINIMAL, sidecar={"replicas": 3,
                                                        "topologySpreadConstraints": spread}))
    assert pod_spec(objects)["topologySpreadConstraints"] == spread
    # A pod that never became ready (a bad image, no certificate) must not block a drain.
    budget = one(objects, "PodDisruptionBudget")["spec"]
    assert budget["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    _, objects = helm.template(merged(MINIMAL, sidecar={
        "replicas": 3, "podDisruptionBudget": {"unhealthyPodEvictionPolicy": "IfHealthyBudget"}}))
    assert one(objects, "PodDisruptionBudget")["spec"]["unhealthyPodEvictionPolicy"] == \
        "IfHealthyBudget"
    assert "topologySpreadConstraints" not in pod_spec(objects)
    proc = helm.run("template", "hook", CHART, values=merged(MINIMAL, sidecar={
        "replicas": 3, "podDisruptionBudget": {"unhealthyPodEvictionPolicy": "Always"}}))
    assert proc.returncode != 0 and "unhealthyPodEvictionPolicy" in proc.stderr


def test_image_tags_may_be_numbers_as_set_gives_them(helm):
    # `--set tag=2` makes a number of it; the image must be "repository:2" all the same.
    proc = helm.run("template", "hook", CHART, "--set", "sidecar.webhook.image.tag=2",
                    "--set", "image.tag=7", values=MINIMAL)
    assert proc.returncode == 0, proc.stderr
    objects = [o for o in yaml.safe_load_all(proc.stdout) if o]
    assert webhook_container(objects)["image"] == f"{IMAGE['repository']}:2"
    assert sidecar(objects)["image"] == "registry.example/certctl:7"
    proc = helm.run("template", "hook", CHART, values=merged(
        MINIMAL, sidecar={"webhook": {"image": {"tag": 1.3}}}))
    assert proc.returncode != 0 and "tag" in proc.stderr  # 1.30 would have become 1.3


def test_rendered_run_flags_are_flags_of_certctl_run(helm, certctl_binary):
    values = merged(MINIMAL, adopt=True,
                    sidecar={"replicas": 2, "servingAddr": "127.0.0.1:9443"})
    _, objects = helm.template(values)
    known = set()
    for command in (["--help"], ["run", "--help"]):  # global flags, and run's own
        usage = subprocess.run([certctl_binary, *command], capture_output=True, text=True,
                               timeout=10).stdout
        known |= set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", usage))
    flags, switches = parse_run_args(sidecar(objects)["args"])
    assert set(flags) | set(switches) <= known, (set(flags) | set(switches)) - known


def test_named_templates_put_the_sidecar_into_another_charts_deployment(helm, tmp_path):
    """A chart with this one as its dependency `certctl` renders the webhook's Deployment
    itself and includes the sidecar with .Subcharts.certctl; this chart, with
    sidecar.createDeployment false, renders only certctl's ServiceAccount and RBAC."""
    parent = tmp_path / "webhook-chart"
    (parent / "templates").mkdir(parents=True)
    shutil.copytree(CHART, parent / "charts" / "certctl")
    (parent / "Chart.yaml").write_text(
        "apiVersion: v2\nname: webhook-chart\nversion: 1.0.0\n"
        "dependencies:\n  - name: certctl\n    version: 0.2.0\n")
    (parent / "templates" / "deployment.yaml").write_text('''\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: my-webhook
spec:
  selector:
    matchLabels: {app: my-webhook}
  template:
    metadata:
      labels: {app: my-webhook}
    spec:
      serviceAccountName: {{ include "certctl.serviceAccountName" .Subcharts.certctl }}
      automountServiceAccountToken: false
      initContainers:
        {{- include "certctl.sidecarContainer" .Subcharts.certctl | nindent 8 }}
      containers:
        - name: server
          image: registry.example/my-webhook:2.0
          volumeMounts:
            {{- include "certctl.webhookVolumeMounts" .Subcharts.certctl | nindent 12 }}
      volumes:
        {{- include "certctl.sidecarVolumes" .Subcharts.certctl | nindent 8 }}
''')
    # The chart does not know where another chart's webhook listens: servingAddr is set.
    certctl_values = {"image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
                      "targets": {"validatingWebhooks": ["hook"]},
                      "sidecar": {"createDeployment": False, "replicas": 2,
                                  "servingAddr": "127.0.0.1:9443"}}
    lint = helm.run("lint", "--strict", str(parent), values={"certctl": certctl_values})
    assert lint.returncode == 0, lint.stdout + lint.stderr
    _, objects = helm.template({"certctl": certctl_values}, chart=str(parent))
    deployment = one(objects, "Deployment")
    assert deployment["metadata"]["name"] == "my-webhook"
    assert not by_kind(objects, "Service")

    # The same container and volumes as the chart renders in its own Deployment.
    _, own = helm.template(merged(certctl_values, sidecar={"createDeployment": True,
                                                           "webhook": {"image": IMAGE}}))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["initContainers"] == [sidecar(own)]
    assert pod["volumes"] == pod_spec(own)["volumes"]
    assert pod["containers"][0]["volumeMounts"] == [mounts(webhook_container(own))
                                                    ["certctl-certs"]]
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    assert parse_run_args(pod["initContainers"][0]["args"])[1] == ["--leader-elect"]
    assert pod["initContainers"][0]["image"] == "registry.example/certctl:0.2.0"  # its version
    assert len(by_kind(objects, "Role")) == 2 and one(objects, "ClusterRole")


def test_named_templates_render_the_service_account_rbac_and_hook_jobs_for_a_parent(helm,
                                                                                   tmp_path):
    """certctl.serviceAccount, certctl.rbac and certctl.hookJobs, included by a parent chart
    with the dependency's own rendering of them turned off, give exactly what the chart
    renders by itself."""
    parent = tmp_path / "parent"
    (parent / "templates").mkdir(parents=True)
    shutil.copytree(CHART, parent / "charts" / "certctl")
    (parent / "Chart.yaml").write_text(
        "apiVersion: v2\nname: parent\nversion: 1.0.0\n"
        "dependencies:\n  - name: certctl\n    version: 0.2.0\n")
    (parent / "templates" / "certctl.yaml").write_text(
        '{{ include "certctl.serviceAccount" .Subcharts.certctl }}\n---\n'
        '{{ include "certctl.rbac" .Subcharts.certctl }}\n---\n'
        '{{ include "certctl.hookJobs" .Subcharts.certctl }}\n')
    values = {"mode": "job", "image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
              "targets": {"validatingWebhooks": ["hook"], "mutatingWebhooks": ["hook"]}}
    _, own = helm.template(merged(values, serviceAccount={"name": "hook-certctl"}))
    _, included = helm.template(
        {"certctl": merged(values, serviceAccount={"create": False, "name": "hook-certctl"},
                           rbac={"create": False}, job={"create": False})},
        chart=str(parent))
    key = lambda obj: (obj["kind"], obj["metadata"]["name"])  # noqa: E731
    assert sorted(key(o) for o in own) == sorted(key(o) for o in included)
    assert sorted(own, key=key) == sorted(included, key=key)
    assert sorted(o["kind"] for o in included) == sorted([
        "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Job",
        "Job"])


# --- against the emulator: the sidecar container with exactly the chart's RBAC ---------------


def wait_for(predicate, what, bound=BOUND):
    deadline = time.monotonic() + bound
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {bound:g}s"
        time.sleep(POLL)


def api_get(cluster, path):
    resp = cluster.api("GET", path)
    return resp.json() if resp.status == 200 else None


def targets_bundles(cluster):
    out = []
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        obj = json.loads(cluster.kubectl("get", kind, "hook", "-o", "json").stdout)
        out += [w["clientConfig"].get("caBundle", "") for w in obj["webhooks"]]
    obj = json.loads(cluster.kubectl("get", "crd", "widgets.hook.io", "-o", "json").stdout)
    out.append(obj["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle", ""))
    obj = json.loads(cluster.kubectl("get", "apiservice", "v1.metrics.hook.io", "-o",
                                     "json").stdout)
    out.append(obj["spec"].get("caBundle", ""))
    return [base64.b64decode(b).decode() for b in out]


def create_targets(cluster):
    cluster.kubectl("create", "namespace", NS)
    for obj in (webhook_configuration("ValidatingWebhookConfiguration", "hook",
                                      ["a.hook.io", "b.hook.io"]),
                webhook_configuration("MutatingWebhookConfiguration", "hook", ["m.hook.io"]),
                crd("widgets.hook.io"), api_service("metrics.hook.io")):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))


CHART_TARGETS = {"validatingWebhooks": ["hook"], "mutatingWebhooks": ["hook"],
                 "crds": ["widgets.hook.io"], "apiServices": ["v1.metrics.hook.io"]}


@pytest.mark.parametrize("leader_election", [False, True],
                         ids=["leader-election-off", "leader-election-on"])
@pytest.mark.backends("real")
def test_sidecar_container_runs_with_exactly_the_chart_rbac(cluster, helm, certctl_binary,
                                                            tmp_path, leader_election):
    create_targets(cluster)
    # The webhook container is the example webhook server (harness/webhook_server.py).
    values = merged(MINIMAL, targets=CHART_TARGETS,
                    sidecar={"leaderElection": leader_election,
                             "webhook": {"image": IMAGE,
                                         "args": ["--cert-dir", "/tls",
                                                  "--listen", "0.0.0.0:9443"]}})
    stream, objects = helm.template(values)
    cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=stream)
    cluster.kubectl("apply", "-f", "-", input=stream)
    deployment = json.loads(cluster.kubectl("get", "deployment", "hook", "-n", NS, "-o",
                                            "json").stdout)
    pod = deployment["spec"]["template"]["spec"]
    # Stored as rendered, nothing pruned, with the API server's pod template defaults
    # (terminationMessagePath, dnsPolicy, probe thresholds, ...): the emulator's, which on the
    # real backend must be kube-apiserver's own.
    assert_contains(pod, pod_spec(objects), "spec", empty_may_be_absent=False)
    template = {"spec": copy.deepcopy(pod_spec(objects))}
    default_pod_template(template)
    assert pod == template["spec"]
    certctl = sidecar(objects)

    health, metrics, https = free_ports(3)
    cert_dir = tmp_path / "tls"
    local = {"--cert-dir": str(cert_dir), "--health-addr": f"127.0.0.1:{health}",
             "--metrics-addr": f"127.0.0.1:{metrics}", "--serving-addr": f"127.0.0.1:{https}"}
    cluster.reset_request_log()
    process = pod_container(cluster, pod, "certctl", NS, {"certctl": certctl_binary},
                            str(tmp_path / "pod"), pod_name="hook-7d9f8-abcde",
                            args=lambda args: rewrite_flags(args, local))
    webhook = pod_container(cluster, pod, "webhook", NS, {"hook": WEBHOOK_SERVER},
                            str(tmp_path / "webhook"), pod_name="hook-7d9f8-abcde",
                            args=lambda args: rewrite_flags(args, {
                                "--cert-dir": str(cert_dir), "--listen": f"127.0.0.1:{https}"}))
    assert process.user == USER
    # Only the local rewrites differ from the container's own args.
    assert process.argv[1:] == rewrite_flags(certctl["args"], local)
    assert ("--leader-elect" in process.argv) == leader_election
    # The token carries what the chart's Roles and ClusterRole grant, no more: the rules
    # the emulator applies are those of the table.
    expected = emulator_rules("sidecar", SECRET, NS, CHART_TARGETS,
                              {"leaderElection": leader_election})
    assert sorted(json.dumps(rule, sort_keys=True) for rule in process.rules) == \
        sorted(json.dumps(rule, sort_keys=True) for rule in expected)

    readiness = certctl["readinessProbe"]["httpGet"]["path"]
    with process:
        # The probes, on the ports the container names. The startupProbe passes without the
        # webhook (the kubelet starts it only then); readiness waits for its handshake.
        probe = certctl["startupProbe"]["httpGet"]["path"]
        wait_for(lambda: process.get(probe, health)[0] == 200,
                 f"startupProbe {probe}\n{process.log()[-3000:]}")
        assert process.get(certctl["livenessProbe"]["httpGet"]["path"], health)[0] == 200
        status, body = process.get(readiness, health)
        assert status == 503 and "serving" in body, body
        with webhook:
            wait_for(lambda: process.get(readiness, health)[0] == 200,
                     f"readinessProbe {readiness} once the webhook serves\n"
                     f"{process.log()[-3000:]}\n{webhook.log()[-2000:]}")
            status, body = process.get("/metrics", metrics)
            assert status == 200 and "certctl_ready 1" in body, body
        # The webhook gone, the pod leaves its Service.
        wait_for(lambda: process.get(readiness, health)[0] == 503,
                 "readiness to follow the webhook going away")

        secret = api_get(cluster, f"/api/v1/namespaces/{NS}/secrets/{SECRET}")
        assert secret["type"] == "kubernetes.io/tls"
        assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "certctl"
        ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
        assert set(targets_bundles(cluster)) == {ca}
        for name in ("tls.crt", "tls.key", "ca.crt"):
            assert (cert_dir / name).read_bytes() == base64.b64decode(secret["data"][name])

        events = api_get(cluster, f"/api/v1/namespaces/{NS}/events")["items"]
        assert any(e["reason"] == "Created" and e["involvedObject"]["name"] == SECRET
                   for e in events), events
        cluster_events = api_get(cluster, "/api/v1/namespaces/default/events")["items"]
        assert sorted(e["involvedObject"]["kind"] for e in cluster_events
                      if e["reason"] == "CABundleInjected") == sorted(
            ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
             "CustomResourceDefinition", "APIService"])
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{SECRET}-certctl"
        lease = api_get(cluster, lease_path)
        if leader_election:
            # --identity defaults to $POD_NAME (the downward API) plus a random suffix.
            assert lease["spec"]["holderIdentity"].startswith("hook-7d9f8-abcde_"), lease
        else:
            assert lease is None

        # A caBundle blanked with kubectl is repaired.
        cluster.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json",
                        "-p", json.dumps([{"op": "replace", "value": "",
                                           "path": "/webhooks/1/clientConfig/caBundle"}]))
        wait_for(lambda: set(targets_bundles(cluster)) == {ca}, "the blanked caBundle repaired",
                 bound=REPAIR_BOUND)

        assert process.stop(signal.SIGTERM) == 0, process.log()[-3000:]
    if leader_election:
        assert not api_get(cluster, lease_path)["spec"].get("holderIdentity")  # released

    requests = [e for e in cluster.request_log()["requests"] if e["user"] == USER]
    assert requests, "certctl made no request as the chart's service account"
    refused = [f"{e['verb']} {e['resource']} {e['namespace']}/{e['name']}"
               for e in requests if e["code"] == 403]
    assert refused == [], refused
