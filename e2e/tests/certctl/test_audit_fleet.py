"""`certctl audit` over several kubeconfig contexts: one report per context, audited in
parallel, an unreachable cluster reported while the others are still audited."""

import json

import pytest
import yaml

from harness.certctl import run_certctl, webhook_configuration
from harness.kubelet import free_ports

NS = "infra"


@pytest.fixture
def fleet(cluster, tmp_path):
    """A kubeconfig with two contexts: `main`, the test's cluster, with one configuration that fails closed on a Service that does not exist; and `down`, an API
    server address nothing listens on."""
    cluster.kubectl("create", "namespace", NS)
    gone = webhook_configuration("ValidatingWebhookConfiguration", "gone", ["x.hook.io"],
                                 service="gone", labels={"audit": "fleet"})
    gone["webhooks"][0]["failurePolicy"] = "Fail"
    cluster.kubectl("apply", "-f", "-", input=json.dumps(gone))
    with open(cluster.kubeconfig(), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    (context,) = config["contexts"]
    cluster_entry = next(c for c in config["clusters"]
                         if c["name"] == context["context"]["cluster"])
    user = context["context"]["user"]
    (closed_port,) = free_ports(1)
    config["clusters"].append({"name": "down", "cluster": dict(
        cluster_entry["cluster"], server=f"https://127.0.0.1:{closed_port}")})
    config["contexts"] = [
        {"name": "main", "context": {"cluster": cluster_entry["name"], "user": user}},
        {"name": "down", "context": {"cluster": "down", "user": user}}]
    config["current-context"] = "main"
    path = tmp_path / "fleet.kubeconfig"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def audit(binary, kubeconfig, *args):
    return run_certctl(binary, "audit", "--kubeconfig", kubeconfig, "--request-timeout", "3s",
                       "--log-level", "off", *args)


@pytest.mark.backends("real")
def test_every_context_gets_a_report_and_an_unreachable_one_does_not_stop_the_others(
        certctl_binary, fleet):
    everything = audit(certctl_binary, fleet, "--all-contexts", "-o", "json")
    assert everything.returncode == 1, everything.stdout + everything.stderr
    reports = json.loads(everything.stdout)
    assert [r["context"] for r in reports] == ["down", "main"]
    down, main = reports
    assert down["ok"] is False and "127.0.0.1" in down["error"], down
    assert "objects" not in down
    assert main["ok"] is False
    assert [(f["code"], f["severity"], f["object"]) for f in main["findings"]] == [
        ("ca-bundle-missing", "critical", "validatingwebhookconfiguration/gone"),
        ("service-missing", "critical", "validatingwebhookconfiguration/gone")]
    assert "1 of 2 contexts could not be audited" in everything.stderr

    # Nothing found where it could look, but one cluster unaudited: exit 2, and the text says
    # which, context by context.
    partial = audit(certctl_binary, fleet, "--context", "main", "--context", "down",
                    "--webhook-selector", "audit=none")
    assert partial.returncode == 2, partial.stdout + partial.stderr
    assert partial.stdout.startswith("context main:\n  audited 0 entries"), partial.stdout
    assert "context down:\n  could not audit: " in partial.stdout

    # One context is one document, as without the flag.
    one = audit(certctl_binary, fleet, "--context", "main", "-o", "json")
    assert one.returncode == 1, one.stdout + one.stderr
    assert isinstance(json.loads(one.stdout), dict)

    both = audit(certctl_binary, fleet, "--all-contexts", "--context", "main")
    assert both.returncode == 2
    assert "excludes" in both.stderr
