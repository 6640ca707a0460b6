"""certctl as a kubectl plugin: a link named kubectl-certctl on PATH, run by the real kubectl
1.32 as `kubectl certctl ...` against the emulator and the real API server. kubectl passes every argument after the
plugin's name and its own environment unchanged; certctl reads the kubeconfig itself and
names itself `kubectl certctl` in help, usage errors and messages."""

import json
import os
import subprocess

import pytest

from harness.certctl import run_certctl, service_with_endpoints, webhook_configuration
from harness.cluster import KUBECTL

pytestmark = pytest.mark.backends("real")

NS = "infra"
SECRET = "webhook-server-cert"

# What `check` of the Secret and one configuration reads; nothing else.
CHECKER_RULES = [
    {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
     "resourceNames": [SECRET, "other-cert"], "namespaces": [NS]},
    {"verbs": ["get"], "apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations"]},
    {"verbs": ["get"], "apiGroups": [""], "resources": ["services"], "namespaces": [NS]},
    {"verbs": ["list"], "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "namespaces": [NS]},
]


@pytest.fixture
def plugin_dir(tmp_path, certctl_binary):
    """A folder holding only the link kubectl finds: kubectl-certctl -> the binary under test."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    os.symlink(certctl_binary, folder / "kubectl-certctl")
    return folder


@pytest.fixture
def kubectl_plugin(cluster, plugin_dir, tmp_path):
    """Runs the real kubectl as `user` with the plugin folder first on a minimal PATH."""
    def run(*args, user="checker"):
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                            "POD_NAMESPACE", "CERTCTL_SERVICEACCOUNT_DIR")}
        env.update(PATH=f"{plugin_dir}:/usr/bin:/bin", HOME=str(tmp_path),
                   KUBECONFIG=cluster.kubeconfig(user),
                   KUBECACHEDIR=str(tmp_path / f"kubecache-{user}"))
        return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env,
                              timeout=60)
    return run


def store_secret(cluster, certctl_binary, name, service):
    manifest = run_certctl(certctl_binary, "generate", "--service", service, "-n", NS,
                           "--secret", name, "-o", "secret-json", "--log-level", "off")
    assert manifest.returncode == 0, manifest.stderr
    cluster.kubectl("apply", "-f", "-", input=manifest.stdout)
    return json.loads(manifest.stdout)["data"]["ca.crt"]


@pytest.fixture
def setup(cluster, certctl_binary):
    """The Secret for Service hook, a Secret issued for another Service, the webhook's
    configuration holding the first CA, and a checker allowed to read just these."""
    cluster.kubectl("create", "namespace", NS)
    for obj in service_with_endpoints("hook", NS):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    ca = store_secret(cluster, certctl_binary, SECRET, "hook")
    store_secret(cluster, certctl_binary, "other-cert", "other")
    vwc = webhook_configuration("ValidatingWebhookConfiguration", "hook-validating",
                                ["a.hook.io"])
    vwc["webhooks"][0]["clientConfig"]["caBundle"] = ca
    cluster.kubectl("apply", "-f", "-", input=json.dumps(vwc))
    cluster.add_user("checker", CHECKER_RULES)


def test_plugin_list_names_the_link(kubectl_plugin, plugin_dir, setup):
    listed = kubectl_plugin("plugin", "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert str(plugin_dir / "kubectl-certctl") in listed.stdout.splitlines()
    assert "warning" not in listed.stderr.lower(), listed.stderr


def test_help_names_kubectl_certctl(kubectl_plugin, setup):
    top = kubectl_plugin("certctl", "--help")
    assert top.returncode == 0, top.stderr
    assert "Usage: kubectl certctl [OPTIONS] SUBCOMMAND" in top.stdout.splitlines()
    check = kubectl_plugin("certctl", "check", "--help")
    assert check.returncode == 0, check.stderr
    assert "Usage: kubectl certctl check [OPTIONS]" in check.stdout.splitlines()
    # Everything after the plugin's name is certctl's, --help of kubectl's own included.
    assert "kubectl [flags] [options]" not in top.stdout + check.stdout


def test_check_of_a_good_secret_and_its_target_exits_zero(kubectl_plugin, cluster, setup):
    cluster.reset_request_log()
    result = kubectl_plugin("certctl", "check", "--secret", SECRET, "-n", NS, "--service",
                            "hook", "--validating-webhook", "hook-validating")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"ok: secret {NS}/{SECRET}: CA "), result.stdout
    assert "1 caBundle(s) up to date" in result.stdout
    # certctl itself read the checker's kubeconfig: its requests, with its own user agent.
    requests = [e for e in cluster.request_log()["requests"] if e["user"] == "checker"]
    assert any(e["resource"] == "secrets" and e["name"] == SECRET for e in requests)
    assert all(e["userAgent"].startswith("certctl/") for e in requests), requests
    assert cluster.writes() == []

    # -o json is passed through untouched too.
    document = kubectl_plugin("certctl", "check", "--secret", SECRET, "-n", NS, "--service",
                              "hook", "-o", "json")
    assert document.returncode == 0, document.stderr
    assert json.loads(document.stdout)["ok"] is True


def test_check_of_a_bad_secret_fails_naming_kubectl_certctl(kubectl_plugin, setup):
    # Issued for another Service: findings, exit 1.
    wrong = kubectl_plugin("certctl", "check", "--secret", "other-cert", "-n", NS, "--service",
                           "hook")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert f'does not cover DNS name "hook.{NS}.svc" [san-missing]' in wrong.stdout

    # A Secret the checker may not read: check cannot run, exit 2, one line naming the plugin.
    forbidden = kubectl_plugin("certctl", "check", "--secret", "not-mine", "-n", NS,
                               "--service", "hook", "--log-level", "off")
    assert forbidden.returncode == 2, forbidden.stdout + forbidden.stderr
    assert forbidden.stderr.startswith("kubectl certctl check: "), forbidden.stderr
    assert "forbidden" in forbidden.stderr.lower(), forbidden.stderr
    assert len(forbidden.stderr.splitlines()) == 1, forbidden.stderr

    # A usage error points at the plugin's own help.
    usage = kubectl_plugin("certctl", "check", "--secret", SECRET, "--no-such-flag")
    assert usage.returncode == 2, usage.stderr
    assert usage.stderr == ("kubectl certctl check: unknown flag --no-such-flag (see 'kubectl "
                            "certctl check --help')\n")


def test_kubeconfig_and_context_flags_go_after_the_plugin_name(kubectl_plugin, cluster, setup):
    # kubectl refuses its own flags before a plugin's name; after it they are certctl's.
    before = kubectl_plugin("--kubeconfig", cluster.kubeconfig("checker"), "certctl", "version")
    assert before.returncode != 0
    assert "flags cannot be placed before plugin name" in before.stderr

    after = kubectl_plugin("certctl", "check", "--kubeconfig", cluster.kubeconfig("admin"),
                           "--secret", "not-mine", "-n", NS, "--log-level", "off")
    # As admin the Secret is readable and simply absent.
    assert after.returncode == 1, after.stdout + after.stderr
    assert after.stdout.splitlines() == [
        f"secret/{NS}/not-mine: does not exist; certctl creates it: certctl job --phase secret "
        f"-n {NS} --secret not-mine --service SERVICE (the chart's hook runs it), or certctl run "
        "beside the webhook [missing]",
        "what to do: docs/troubleshooting.md#missing",
        "note: no SAN was checked: name what the certificate must cover with --service, "
        "--dns-name or --ip, or give the targets whose calls it must serve"]


def test_audit_as_a_plugin_reads_every_webhook(kubectl_plugin, cluster, setup):
    cluster.add_user("auditor", [
        {"verbs": ["list"], "apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]},
        {"verbs": ["list"], "apiGroups": ["apiextensions.k8s.io"],
         "resources": ["customresourcedefinitions"]},
        {"verbs": ["list"], "apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"]},
        {"verbs": ["list"], "apiGroups": [""], "resources": ["services"]},
        {"verbs": ["list"], "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"]}])
    cluster.reset_request_log()

    audited = kubectl_plugin("certctl", "audit", "-o", "json", user="auditor")

    assert audited.returncode == 0, audited.stdout + audited.stderr
    report = json.loads(audited.stdout)
    assert report["ok"] is True and report["findings"] == []
    assert [(o["name"], o["calls"]) for o in report["objects"]] == \
        [("hook-validating", f"hook.{NS}.svc")]
    assert cluster.writes() == []

    bad = kubectl_plugin("certctl", "audit", "--fail-on", "everything", user="auditor")
    assert bad.returncode == 2
    assert bad.stderr.startswith("kubectl certctl audit: "), bad.stderr
