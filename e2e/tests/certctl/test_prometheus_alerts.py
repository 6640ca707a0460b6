"""The chart's alerting rules (manifests/helm/certctl/files/alerts.yaml) in a real Prometheus
(Debian's, harness/prometheus.py) scraping real `certctl run` processes against the emulator,
each with exactly the chart's RBAC.

Three webhooks in one namespace, each with its own Secret and ValidatingWebhookConfiguration:
`renewed`, whose server certificate lives 10 days and is renewed 3 days ahead (always inside
the alert's 14 days, never in the last sixth of its life), `healthy`, with 10 years for the
CA and the certificate, and `external`, a Secret of another issuer whose 10-day certificate
has one day left. Prometheus scrapes them every second and evaluates every second, with the
labels a PodMonitor gives (namespace, pod, a job per webhook). The expiry alert fires for
`external`'s leaf within seconds, and once a rule evaluation has seen `healthy`'s series,
nothing else fires or waits (pending). Every wait polls Prometheus's HTTP API every 0.2 s
under a bound; Prometheus is stopped at the end.

Also the plain Prometheus configuration of docs/monitoring.md (for clusters without the
Operator): its relabeling keeps certctl's port of the webhook's pods only and gives the
targets the labels the rules use.
"""

import base64
import datetime
import json
import os
import re
import time

import pytest
import yaml

from harness import badpki
from harness.badpki import Authority
from harness.certctl import webhook_configuration
from harness.helm import CERTCTL_IMAGE, Helm, find_helm
from harness.prometheus import Prometheus
from harness.rbac import CHART, REPO, emulator_rules
from harness.sidecar import Sidecar, stop_all
from harness.waiting import wait_for

NS = "infra"
RULES = f"{CHART}/files/alerts.yaml"
DAY = 86400
FIRE_BOUND = 20.0  # from Prometheus ready to the alert firing: a few scrapes and evaluations

WEBHOOKS = {
    # certctl's own: 10 days, renewed 3 days ahead, so always inside the alert's 14 days
    # but never in the last sixth of its life. No alert.
    "renewed": ["--cert-validity", "10d", "--renew-before", "3d"],
    "healthy": ["--cert-validity", "10y", "--ca-validity", "10y"],
    # A Secret certctl does not manage: 10 days, 1 left, and its issuer did not renew it.
    "external": ["--renew-before", "12h"],
}


def user(name):
    return f"system:serviceaccount:{NS}:{name}"


def secret(name):
    return f"{name}-tls"


def rfc3339(text):
    """Prometheus's timestamps (nanoseconds, a Z) as unix seconds."""
    seconds, _, fraction = text.rstrip("Z").partition(".")
    stamp = datetime.datetime.strptime(seconds, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return stamp + (float(f"0.{fraction}") if fraction else 0.0)


def key(alert):
    labels = alert["labels"]
    return (labels["alertname"], labels.get("secret"), labels.get("role"), alert["state"])


def external_secret(name):
    """A kubernetes.io/tls Secret of another issuer: a 10-day server certificate with one
    day left."""
    ca = Authority(f"{name}-issuer")
    start = badpki.now() - datetime.timedelta(days=9)
    leaf = ca.issue(badpki.service_names(name, NS), not_before=start,
                    not_after=start + datetime.timedelta(days=10))
    data = {"ca.crt": ca.cert_pem, "tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": secret(name), "namespace": NS},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


@pytest.mark.time_limit(90)
def test_expiry_alert_fires_for_a_certificate_left_unrenewed_and_not_for_short_lives(
        cluster, certctl_binary, tmp_path):
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(external_secret("external")))
    sidecars = []
    try:
        for name, flags in WEBHOOKS.items():
            cluster.add_user(user(name), emulator_rules(
                "sidecar", secret(name), NS, {"validatingWebhooks": [name]},
                {"leaderElection": False}))
            cluster.kubectl("apply", "-f", "-", input=json.dumps(webhook_configuration(
                "ValidatingWebhookConfiguration", name, [f"{name}.hook.io"], service=name)))
            sidecars.append(Sidecar(certctl_binary, cluster, str(tmp_path), name, user(name),
                                    ["--validating-webhook", name, "--secret", secret(name),
                                     *flags], service=name).start())
        for sidecar in sidecars:
            wait_for(lambda: sidecar.readyz()[0] == 200, f"/readyz 200 from {sidecar.name}",
                     watch=sidecars)

        jobs = {f"{NS}/{s.name}": [(f"127.0.0.1:{s.metrics_port}",
                                    {"namespace": NS, "pod": f"{s.name}-0"})]
                for s in sidecars}
        with Prometheus(tmp_path, jobs, [RULES]) as prometheus:
            ready_at = time.monotonic()

            def firing():
                return [a for a in prometheus.alerts() if a["state"] == "firing"]

            fired = prometheus.wait_for(firing, "WebhookCertificateExpiresSoon firing",
                                        bound=FIRE_BOUND)
            took = time.monotonic() - ready_at
            print(f"the expiry alert fired {took:.1f}s after Prometheus was ready")

            # A rule evaluation that has seen both webhooks' certificates: after both their
            # series are in, one more evaluation.
            def healthy_series():
                series = prometheus.query('certctl_certificate_expiration_timestamp_seconds'
                                          f'{{secret="{NS}/{secret("healthy")}"}}')
                return len(series) == 2 and series

            healthy = prometheus.wait_for(healthy_series, "the healthy certificates scraped")
            seen = time.time()

            def evaluated_after_seen():
                groups = prometheus.rule_groups()
                return all(rfc3339(g["lastEvaluation"]) > seen for g in groups) and groups

            prometheus.wait_for(evaluated_after_seen, "a rule evaluation after that")
            alerts = prometheus.alerts()

            # Exactly one alert: the external server certificate, firing. Not the one certctl
            # renews 3 days ahead, though only 10 days remain of it.
            assert sorted(key(a) for a in alerts) == [
                ("WebhookCertificateExpiresSoon", f"{NS}/{secret('external')}", "leaf",
                 "firing")], json.dumps(alerts, indent=1)
            assert [key(a) for a in fired] == [key(alerts[0])]
            alert = alerts[0]
            assert alert["labels"] == {
                "alertname": "WebhookCertificateExpiresSoon", "severity": "warning",
                "namespace": NS, "secret": f"{NS}/{secret('external')}", "role": "leaf"}
            left = float(alert["value"])
            assert 0.9 * DAY < left <= 1 * DAY, left
            assert alert["annotations"]["summary"].startswith(
                f"The leaf certificate of {NS}/{secret('external')} expires in 23h"), alert
            renewed = prometheus.query('certctl_certificate_expiration_timestamp_seconds'
                                       f'{{secret="{NS}/{secret("renewed")}",role="leaf"}}')
            assert 9.9 * DAY < float(renewed[0]["value"][1]) - time.time() <= 10 * DAY
            # Nothing about the healthy webhook, its CA 10 years away like its leaf.
            assert {s["metric"]["role"] for s in healthy} == {"ca", "leaf"}
            assert all(float(s["value"][1]) > time.time() + 9 * 365 * DAY for s in healthy)
            assert not [a for a in alerts if a["labels"].get("secret", "").endswith("healthy-tls")
                        or a["labels"].get("pod") == "healthy-0"]
            # Both targets were up all along.
            assert sorted((t["labels"]["job"], t["health"]) for t in prometheus.targets()) == \
                [(f"{NS}/external", "up"), (f"{NS}/healthy", "up"), (f"{NS}/renewed", "up")]
            assert took < FIRE_BOUND
        assert prometheus.process.proc.returncode is not None  # stopped, not left running
        for sidecar in sidecars:
            assert sidecar.alive(), sidecar.describe()
    finally:
        stop_all(sidecars)


def pod_targets(pod, namespace, pod_name, first_port):
    """Static targets with the discovery labels Prometheus's pod role gives each container
    port of a pod spec (Debian's Prometheus has no Kubernetes discovery): one per port, at
    127.0.0.1 from first_port on."""
    labels = pod["metadata"]["labels"]
    targets = []
    for init, containers in ((True, pod["spec"].get("initContainers", [])),
                             (False, pod["spec"].get("containers", []))):
        for container in containers:
            for port in container.get("ports", []):
                meta = {"__meta_kubernetes_namespace": namespace,
                        "__meta_kubernetes_pod_name": pod_name,
                        "__meta_kubernetes_pod_container_name": container["name"],
                        "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                        "__meta_kubernetes_pod_container_init": str(init).lower()}
                meta.update({"__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k): v
                             for k, v in labels.items()})
                targets.append({"targets": [f"127.0.0.1:{first_port + len(targets)}"],
                                "labels": meta})
    return targets


def test_the_documented_plain_prometheus_configuration_labels_certctls_targets(tmp_path):
    with open(os.path.join(REPO, "docs", "monitoring.md"), encoding="utf-8") as f:
        doc = f.read()
    section = doc[doc.index("## Without the Operator"):doc.index("## Raw manifests")]
    config = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))
    assert len(config["rule_files"]) == 1
    [scrape] = config["scrape_configs"]
    [discovery] = scrape.pop("kubernetes_sd_configs")
    assert discovery["role"] == "pod"
    namespace = discovery["namespaces"]["names"][0]
    # The pods as the chart renders them (release hook, the webhook's Service my-hook), and
    # another application's pod in the namespace with a port of the same name.
    (tmp_path / "helm").mkdir()
    helm = Helm(find_helm(), tmp_path / "helm")
    values = {"image": CERTCTL_IMAGE, "webhook": {"service": "my-hook"},
              "targets": {"validatingWebhooks": ["hook"]},
              "sidecar": {"webhook": {"image": {"repository": "registry.example/hook"}}}}
    proc = helm.run("template", "hook", CHART, "--namespace", namespace, values=values)
    assert proc.returncode == 0, proc.stderr
    [deployment] = [o for o in yaml.safe_load_all(proc.stdout)
                    if o and o["kind"] == "Deployment"]
    chart_pod = deployment["spec"]["template"]
    other_pod = {"metadata": {"labels": {"app.kubernetes.io/name": "other",
                                         "app.kubernetes.io/component": "webhook"}},
                 "spec": {"containers": [{"name": "server", "ports": [
                     {"name": "metrics", "containerPort": 8080}]}]}}
    scrape["static_configs"] = (pod_targets(chart_pod, namespace, "my-hook-7d9f8-abcde", 1) +
                                pod_targets(other_pod, namespace, "other-5c6d7-fghij", 11))
    ports = [t["labels"]["__meta_kubernetes_pod_container_port_name"]
             for t in scrape["static_configs"]]
    assert sorted(ports) == ["health", "https", "metrics", "metrics"], ports
    with Prometheus(tmp_path, scrape_configs=[scrape], rule_files=[RULES]) as prometheus:
        active = prometheus.wait_for(prometheus.targets, "the targets discovered")
        [certctl_port] = [t["targets"][0] for t in scrape["static_configs"]
                          if t["labels"]["__meta_kubernetes_pod_container_name"] == "certctl"
                          and t["labels"]["__meta_kubernetes_pod_container_port_name"] ==
                          "metrics"]
        assert [t["labels"] for t in active] == [{
            "instance": certctl_port, "job": f"{namespace}/hook", "namespace": namespace,
            "pod": "my-hook-7d9f8-abcde"}]
        assert len(prometheus.targets("dropped")) == 3
        assert [g["name"] for g in prometheus.rule_groups()] == ["certctl"]
