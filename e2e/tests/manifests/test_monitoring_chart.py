"""The chart's monitoring and the webhook pods' protection (mode sidecar): the PodMonitor or
ServiceMonitor (with its metrics Service), the PrometheusRule built from the rule file
manifests/helm/certctl/files/alerts.yaml, the PodDisruptionBudget and the NetworkPolicy.

Offline: all off by default; `helm lint --strict` with every value on; each object selects
the pods and ports the Deployment renders; the PrometheusRule is the rule file (and its
values change only what they name); `promtool check rules` and `promtool test rules`
(e2e/tests/manifests/alerts_test.yaml, which must make every alert fire and stay silent);
docs/monitoring.md shows the file; refused combinations fail lint and template with a
message naming the value; the schema refuses bad values.

Against an API server: with the Operator's CRDs the rendered objects apply (server-side
validation first), read back as rendered and re-apply without a change; without them the
monitoring kinds are unknown, as in a cluster without the Operator; the raw-manifest recipe
of docs/monitoring.md applies too; the release notes name the objects rendered; `helm
install` creates every object and `helm uninstall` removes them. On the real API server the
CRDs are the Operator's own (harness/operator_crds.py, from its Go module at a pinned
version).

promtool is Debian's (scripts/setup.sh); a missing one fails the tests.
"""

import copy
import json
import os
import re
import subprocess

import pytest
import yaml

from harness.helm import CERTCTL_IMAGE, Helm, by_kind, find_helm, merged, one
from harness.operator_crds import operator_crds
from harness.prometheus import find_tool
from harness.rbac import CHART, REPO

HERE = os.path.dirname(os.path.abspath(__file__))
RULE_FILE = os.path.join(CHART, "files", "alerts.yaml")
ALERTS_TEST = os.path.join(HERE, "alerts_test.yaml")
MONITORING_DOC = os.path.join(REPO, "docs", "monitoring.md")

NS = "infra"
RELEASE = "rel"
IMAGE = {"repository": "registry.example/hook", "tag": "1.2.3"}
MINIMAL = {"image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
           "targets": {"validatingWebhooks": ["hook"]}, "sidecar": {"webhook": {"image": IMAGE}}}
PROMETHEUS_PEER = {"namespaceSelector": {"matchLabels": {
    "kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
# Every monitoring value on (the PodMonitor; the ServiceMonitor is the alternative).
FULL = {
    **MINIMAL,
    "sidecar": {"webhook": {"image": IMAGE}, "replicas": 3,
                "podDisruptionBudget": {"maxUnavailable": "34%"},
                "networkPolicy": {
                    "enabled": True, "metricsFrom": [PROMETHEUS_PEER],
                    "healthFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                    "webhookFrom": [{"ipBlock": {"cidr": "172.16.0.0/12"}}],
                    "extraIngress": [{"ports": [{"port": 9090, "protocol": "TCP"}]}]}},
    "monitoring": {"additionalLabels": {"release": "kube-prometheus-stack"},
                   "interval": "15s", "scrapeTimeout": "5s",
                   "podMonitor": {"enabled": True},
                   "prometheusRule": {"enabled": True, "expiryDays": 7,
                                      "alertLabels": {"team": "platform"},
                                      "alerts": {"WebhookCertificateNotReady": {"for": "15m"},
                                                 "WebhookFieldOverwritten": {
                                                     "severity": "critical"},
                                                 "WebhookCertificateNoLeader": {
                                                     "enabled": False}}}},
}
MONITORING_KINDS = {"PodMonitor", "ServiceMonitor", "PrometheusRule"}


def with_service_monitor(values):
    values = copy.deepcopy(values)
    values["monitoring"]["podMonitor"] = {"enabled": False}
    values["monitoring"]["serviceMonitor"] = {"enabled": True}
    return values


@pytest.fixture(scope="module")
def helm(tmp_path_factory):
    return Helm(find_helm(), tmp_path_factory.mktemp("helm"))


def template(helm, values, namespace=NS):
    proc = helm.run("template", RELEASE, CHART, "--namespace", namespace, values=values)
    assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
    return proc.stdout, [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def pod_template(objects):
    return one(objects, "Deployment")["spec"]["template"]


def container_ports(objects):
    """{port name: (container, number)} of every container of the webhook's pods."""
    spec = pod_template(objects)["spec"]
    return {p["name"]: (c["name"], p["containerPort"])
            for c in spec["initContainers"] + spec["containers"] for p in c.get("ports", [])}


def selects(selector, labels):
    return selector.items() <= labels.items()


def rule_file():
    with open(RULE_FILE, encoding="utf-8") as f:
        return yaml.safe_load(f)


def rules_by_alert(groups):
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


# --- offline: defaults, lint, labels -----------------------------------------------------------


def test_everything_is_off_by_default(helm):
    with open(os.path.join(CHART, "values.yaml"), encoding="utf-8") as f:
        values = yaml.safe_load(f)
    assert values["monitoring"] == {
        "namespace": "", "additionalLabels": {}, "podSelector": {}, "interval": "30s",
        "scrapeTimeout": "10s", "podMonitor": {"enabled": False},
        "serviceMonitor": {"enabled": False},
        "prometheusRule": {"enabled": False, "expiryDays": 14, "criticalExpiryDays": 3,
                           "runbookUrl": "", "alertLabels": {}, "alerts": {}}}
    assert values["sidecar"]["podDisruptionBudget"] == {
        "enabled": None, "maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    assert values["sidecar"]["networkPolicy"] == {
        "enabled": False, "webhookFrom": [], "metricsFrom": [], "healthFrom": [],
        "extraIngress": []}
    for mode_values in (MINIMAL, merged(MINIMAL, mode="job")):
        _, objects = template(helm, mode_values)
        kinds = {obj["kind"] for obj in objects}
        assert not kinds & (MONITORING_KINDS | {"PodDisruptionBudget", "NetworkPolicy"}), kinds
        assert [s["metadata"]["name"] for s in by_kind(objects, "Service")] in ([], ["hook"])


@pytest.mark.parametrize("values", [FULL, with_service_monitor(FULL)],
                         ids=["pod-monitor", "service-monitor"])
def test_lint_passes_with_every_value_on_and_every_object_is_labelled(helm, values):
    lint = helm.run("lint", "--strict", CHART, "--namespace", NS, values=values)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    _, objects = template(helm, values)
    kinds = sorted(obj["kind"] for obj in objects if obj["kind"] not in (
        "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"))
    monitor = "PodMonitor" if values["monitoring"]["podMonitor"]["enabled"] else \
        "ServiceMonitor"
    services = 1 if monitor == "PodMonitor" else 2
    assert kinds == sorted(["Deployment", "NetworkPolicy", "PodDisruptionBudget",
                            "PrometheusRule", monitor] + ["Service"] * services)
    # The webhook's own objects are labelled as the webhook (its Service's name), certctl's
    # as certctl.
    webhook_kinds = {"Deployment", "PodDisruptionBudget", "NetworkPolicy"}
    for obj in objects:
        labels = obj["metadata"]["labels"]
        webhooks = obj["kind"] in webhook_kinds or (
            obj["kind"] == "Service" and obj["metadata"]["name"] == "hook")
        assert labels["app.kubernetes.io/name"] == ("hook" if webhooks else "certctl"), obj
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == "certctl-0.2.0"
        assert labels["app.kubernetes.io/component"]
        if obj["kind"] in MONITORING_KINDS:
            assert labels["release"] == "kube-prometheus-stack"
            assert labels["app.kubernetes.io/component"] == "monitoring"
            assert obj["metadata"]["name"] == f"{RELEASE}-certctl"
            assert obj["metadata"]["namespace"] == NS
        else:
            assert "release" not in labels


# --- offline: what scrapes what ----------------------------------------------------------------


def test_pod_monitor_scrapes_certctls_metrics_port_of_the_webhook_pods(helm):
    _, objects = template(helm, FULL)
    monitor = one(objects, "PodMonitor")
    pods = pod_template(objects)
    assert selects(monitor["spec"]["selector"]["matchLabels"], pods["metadata"]["labels"])
    assert monitor["spec"]["selector"]["matchLabels"] == \
        one(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    assert monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "15s",
         "scrapeTimeout": "5s"}]
    # The named port is certctl's, on its native sidecar (an init container).
    assert container_ports(objects)["metrics"] == ("certctl", 8080)
    assert "--metrics-addr" in pods["spec"]["initContainers"][0]["args"]


def test_service_monitor_follows_a_metrics_service_that_lists_unready_pods(helm):
    values = merged(with_service_monitor(FULL), sidecar={"metricsPort": 9100})
    _, objects = template(helm, values)
    monitor = one(objects, "ServiceMonitor")
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    assert sorted(services) == ["hook", "hook-metrics"]
    metrics, webhook = services["hook-metrics"], services["hook"]
    assert metrics["spec"]["clusterIP"] == "None"
    assert metrics["spec"]["publishNotReadyAddresses"] is True
    assert selects(metrics["spec"]["selector"], pod_template(objects)["metadata"]["labels"])
    assert metrics["spec"]["ports"] == [{"name": "metrics", "port": 9100, "targetPort": 9100,
                                         "protocol": "TCP"}]
    assert container_ports(objects)["metrics"] == ("certctl", 9100)
    # The monitor selects the metrics Service only, never the webhook's own.
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selects(selector, metrics["metadata"]["labels"])
    assert not selects(selector, webhook["metadata"]["labels"])
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "15s",
         "scrapeTimeout": "5s"}]
    assert not by_kind(objects, "PodMonitor")


def test_monitors_for_a_deployment_of_another_chart(helm):
    values = merged(MINIMAL, sidecar={"createDeployment": False, "replicas": 3},
                    monitoring={"podSelector": {"app": "my-webhook"}, "namespace": "monitoring",
                                "podMonitor": {"enabled": True}})
    _, objects = template(helm, values)
    monitor = one(objects, "PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == {"app": "my-webhook"}
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    # No pods of its own: no budget, even with three replicas.
    assert not by_kind(objects, "PodDisruptionBudget") and not by_kind(objects, "Deployment")


# --- offline: the PrometheusRule and the rule file ---------------------------------------------


ABSENT = "absent(certctl_ready)"


def in_namespace(rules, namespace=NS):
    """The rule file's rules as the chart renders them by default: the absent() alert asks for
    the webhook's namespace only."""
    rules = copy.deepcopy(rules)
    absent = rules["WebhookCertificateMetricsAbsent"]
    assert absent["expr"] == ABSENT
    absent["expr"] = f'absent(certctl_ready{{namespace="{namespace}"}})'
    return rules


def test_prometheus_rule_is_the_rule_file(helm):
    values = merged(MINIMAL, monitoring={"prometheusRule": {"enabled": True}})
    _, objects = template(helm, values)
    rule = one(objects, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rules_by_alert(rule["spec"]["groups"]) == in_namespace(
        rules_by_alert(rule_file()["groups"]))
    assert len(rules_by_alert(rule["spec"]["groups"])) == 9
    for alert in rules_by_alert(rule["spec"]["groups"]).values():
        assert alert["annotations"]["runbook_url"].endswith("/docs/monitoring.md#the-alerts")


def test_the_runbook_url_and_the_critical_step_follow_their_values(helm):
    values = merged(MINIMAL, monitoring={"prometheusRule": {
        "enabled": True, "runbookUrl": "https://wiki.example/certctl", "criticalExpiryDays": 5}})
    _, objects = template(helm, values)
    rules = rules_by_alert(one(objects, "PrometheusRule")["spec"]["groups"])
    assert {r["annotations"]["runbook_url"] for r in rules.values()} == {
        "https://wiki.example/certctl"}
    critical = rules["WebhookCertificateExpiresCritical"]["expr"]
    assert "< 5 * 86400" in critical and "< 3 * 86400" not in critical


def test_prometheus_rule_values_change_only_what_they_name(helm, tmp_path):
    _, objects = template(helm, FULL)
    groups = one(objects, "PrometheusRule")["spec"]["groups"]
    got, want = rules_by_alert(groups), in_namespace(rules_by_alert(rule_file()["groups"]))
    assert "WebhookCertificateNoLeader" not in got
    expiry = got["WebhookCertificateExpiresSoon"]["expr"]
    assert expiry.count("< 7 * 86400") == 1 and "14" not in expiry
    assert got["WebhookCertificateNotReady"]["for"] == "15m"
    assert got["WebhookFieldOverwritten"]["labels"] == {"severity": "critical",
                                                          "team": "platform"}
    for name, rule in got.items():
        assert rule["labels"]["team"] == "platform"
        expected = copy.deepcopy(want[name])
        expected["labels"] = dict(expected["labels"], team="platform")
        if name == "WebhookCertificateExpiresSoon":
            expected["expr"] = expected["expr"].replace("< 14 * 86400", "< 7 * 86400")
        if name == "WebhookCertificateNotReady":
            expected["for"] = "15m"
        if name == "WebhookFieldOverwritten":
            expected["labels"]["severity"] = "critical"
        assert rule == expected, name
    # What the chart renders is a valid rule file for Prometheus.
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump({"groups": groups}))
    check = subprocess.run([find_tool("promtool"), "check", "rules", str(rendered)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 8 rules found" in check.stdout


def test_promtool_checks_the_rule_file_and_its_unit_tests_pass():
    promtool = find_tool("promtool")
    check = subprocess.run([promtool, "check", "rules", RULE_FILE], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 9 rules found" in check.stdout
    test = subprocess.run([promtool, "test", "rules", ALERTS_TEST], capture_output=True,
                          text=True, timeout=120, cwd=HERE)
    assert test.returncode == 0, test.stdout + test.stderr
    assert "SUCCESS" in test.stdout and "FAILED" not in test.stdout, test.stdout


def test_the_unit_tests_make_every_alert_fire_and_stay_silent():
    with open(ALERTS_TEST, encoding="utf-8") as f:
        tests = yaml.safe_load(f)
    assert [os.path.normpath(os.path.join(HERE, p)) for p in tests["rule_files"]] == [RULE_FILE]
    fires, silent = set(), set()
    for test in tests["tests"]:
        for case in test["alert_rule_test"]:
            (fires if case["exp_alerts"] else silent).add(case["alertname"])
            for alert in case["exp_alerts"]:
                # Every label of the alert is spelled out, severity included.
                assert "severity" in alert["exp_labels"], (test["name"], alert)
    alerts = set(rules_by_alert(rule_file()["groups"]))
    assert fires == alerts, alerts - fires
    assert silent == alerts, alerts - silent


def test_docs_show_the_rule_file():
    with open(MONITORING_DOC, encoding="utf-8") as f:
        doc = f.read()
    with open(RULE_FILE, encoding="utf-8") as f:
        rules = f.read()
    block = re.search(r"<!-- BEGIN manifests/helm/certctl/files/alerts.yaml[^\n]*-->\n\n"
                      r"```yaml\n(.*?)```\n\n<!-- END", doc, re.S)
    assert block, "docs/monitoring.md lacks the copy of the rule file (scripts/gen-docs.sh)"
    assert block.group(1) == rules, "docs/monitoring.md is out of date: run scripts/gen-docs.sh"
    for alert in rules_by_alert(rule_file()["groups"]):
        assert f"| {alert} |" in doc, f"docs/monitoring.md does not explain {alert}"


# --- offline: disruption budget and network policy ---------------------------------------------


@pytest.mark.parametrize("replicas, enabled, expected", [
    (1, None, None), (2, None, 1), (1, True, 1), (3, False, None)],
    ids=["one-replica", "two-replicas", "forced-on", "forced-off"])
def test_pod_disruption_budget_follows_the_replicas(helm, replicas, enabled, expected):
    values = merged(MINIMAL, sidecar={"replicas": replicas,
                                      "podDisruptionBudget": {"enabled": enabled}})
    _, objects = template(helm, values)
    budgets = by_kind(objects, "PodDisruptionBudget")
    if expected is None:
        assert budgets == []
        return
    [pdb] = budgets
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["metadata"]["name"] == "hook" and pdb["metadata"]["namespace"] == NS
    assert pdb["spec"] == {"maxUnavailable": expected, "selector": one(
        objects, "Deployment")["spec"]["selector"], "unhealthyPodEvictionPolicy": "AlwaysAllow"}


def test_pod_disruption_budget_takes_a_percentage(helm):
    _, objects = template(helm, FULL)
    assert one(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == "34%"


def admitted(policy):
    """{port: [from peers] or None (every source)} of an ingress policy."""
    out = {}
    for rule in policy["spec"]["ingress"]:
        for port in rule["ports"]:
            assert port["protocol"] == "TCP"
            out[port["port"]] = rule.get("from")
    return out


def test_network_policy_admits_the_webhook_port_and_certctls_ports_only_to_their_peers(helm):
    _, objects = template(helm, FULL)
    policy = one(objects, "NetworkPolicy")
    assert policy["metadata"]["name"] == "hook" and policy["metadata"]["namespace"] == NS
    assert policy["spec"]["podSelector"] == one(objects, "Deployment")["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress stays open
    ports = container_ports(objects)
    assert admitted(policy) == {
        ports["https"][1]: [{"ipBlock": {"cidr": "172.16.0.0/12"}}],
        ports["metrics"][1]: [PROMETHEUS_PEER],
        ports["health"][1]: [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
        9090: None}
    # Every port the pods serve is covered: an isolated pod takes nothing else.
    assert {number for _, number in ports.values()} <= set(admitted(policy))


def test_network_policy_defaults_leave_the_webhook_open_and_certctl_closed(helm):
    values = merged(MINIMAL, sidecar={"networkPolicy": {"enabled": True}})
    _, objects = template(helm, values)
    policy = one(objects, "NetworkPolicy")
    ports = container_ports(objects)
    # The API server calls from addresses no selector matches: every source.
    assert admitted(policy) == {ports["https"][1]: None}
    assert ports["metrics"][1] not in admitted(policy)
    assert ports["health"][1] not in admitted(policy)  # the kubelet is on the node


# --- offline: refused values -------------------------------------------------------------------


REFUSED = [
    (merged(MINIMAL, mode="job", monitoring={"prometheusRule": {"enabled": True}}),
     "monitoring.prometheusRule.enabled needs mode sidecar"),
    (merged(MINIMAL, mode="job", monitoring={"podMonitor": {"enabled": True}}),
     "monitoring.podMonitor.enabled needs mode sidecar"),
    (merged(MINIMAL, mode="job", monitoring={"serviceMonitor": {"enabled": True}}),
     "monitoring.serviceMonitor.enabled needs mode sidecar"),
    (merged(MINIMAL, mode="job", sidecar={"podDisruptionBudget": {"enabled": True}}),
     "sidecar.podDisruptionBudget.enabled needs mode sidecar"),
    (merged(MINIMAL, mode="job", sidecar={"networkPolicy": {"enabled": True}}),
     "sidecar.networkPolicy.enabled needs mode sidecar"),
    (merged(MINIMAL, monitoring={"podMonitor": {"enabled": True},
                                 "serviceMonitor": {"enabled": True}}),
     "monitoring.podMonitor.enabled and monitoring.serviceMonitor.enabled are both true"),
    (merged(MINIMAL, sidecar={"createDeployment": False},
            monitoring={"serviceMonitor": {"enabled": True}}),
     "monitoring.serviceMonitor.enabled with sidecar.createDeployment false needs "
     "monitoring.podSelector"),
    (merged(MINIMAL, monitoring={"podMonitor": {"enabled": True}, "interval": "0s"}),
     "monitoring.interval is 0s; it must be longer than zero"),
    (merged(MINIMAL, monitoring={"podMonitor": {"enabled": True}, "interval": "1m",
                                 "scrapeTimeout": "1m500ms"}),
     "monitoring.scrapeTimeout (1m500ms) is longer than monitoring.interval (1m)"),
    (merged(MINIMAL, monitoring={"podMonitor": {"enabled": True}},
            sidecar={"networkPolicy": {"enabled": True}}),
     "monitoring.podMonitor.enabled with sidecar.networkPolicy.enabled needs "
     "sidecar.networkPolicy.metricsFrom"),
    (merged(MINIMAL, monitoring={"prometheusRule": {"enabled": True, "alerts": {
        "WebhookCertificateExpired": {"for": "1m"}}}}),
     "monitoring.prometheusRule.alerts names WebhookCertificateExpired, which "
     "files/alerts.yaml does not have; the alerts are WebhookCertificateExpiresSoon, "),
    (merged(MINIMAL, monitoring={"prometheusRule": {"enabled": True, "expiryDays": 30}}),
     "monitoring.prometheusRule.expiryDays (30) must be below certificate.renewBefore (30d)"),
    (merged(MINIMAL, certificate={"renewBefore": "7d"},
            monitoring={"prometheusRule": {"enabled": True}}),
     "monitoring.prometheusRule.expiryDays (14) must be below certificate.renewBefore (7d)"),
    (merged(MINIMAL, monitoring={"prometheusRule": {"enabled": True, "expiryDays": 7,
                                                    "criticalExpiryDays": 7}}),
     "monitoring.prometheusRule.criticalExpiryDays (7) must be below "
     "monitoring.prometheusRule.expiryDays (7)"),
    (merged(MINIMAL, sidecar={"createDeployment": False,
                              "podDisruptionBudget": {"enabled": True}}),
     "sidecar.podDisruptionBudget.enabled needs sidecar.createDeployment"),
    (merged(MINIMAL, sidecar={"createDeployment": False, "networkPolicy": {"enabled": True}}),
     "sidecar.networkPolicy.enabled needs sidecar.createDeployment"),
]


@pytest.mark.parametrize("values, message", REFUSED, ids=[
    "rule-in-job", "podmonitor-in-job", "servicemonitor-in-job", "pdb-in-job",
    "netpol-in-job", "both-monitors", "monitor-without-pods", "interval-zero",
    "timeout-above-interval", "netpol-shuts-out-prometheus", "unknown-alert",
    "expiry-at-renewal", "expiry-above-renewal", "critical-not-below-warning",
    "pdb-without-pods", "netpol-without-pods"])
def test_combinations_that_cannot_work_fail_lint_and_template(helm, values, message):
    lint = helm.run("lint", CHART, values=values)
    assert lint.returncode != 0, lint.stdout
    assert message in lint.stdout + lint.stderr
    rendered = helm.run("template", "hook", CHART, values=values)
    assert rendered.returncode != 0, rendered.stdout
    assert f"certctl: {message}" in rendered.stderr, rendered.stderr


@pytest.mark.parametrize("override, field", [
    ({"monitoring": {"interval": "1 min"}}, "monitoring.interval"),
    ({"monitoring": {"scrapeTimeout": ""}}, "monitoring.scrapeTimeout"),
    ({"monitoring": {"podmonitor": {"enabled": True}}}, "podmonitor"),
    ({"monitoring": {"podMonitor": {"enabled": "yes"}}}, "monitoring.podMonitor.enabled"),
    ({"monitoring": {"additionalLabels": {"release": 1}}}, "monitoring.additionalLabels"),
    ({"monitoring": {"prometheusRule": {"expiryDays": 0}}}, "expiryDays"),
    ({"monitoring": {"prometheusRule": {"criticalExpiryDays": 0}}}, "criticalExpiryDays"),
    ({"monitoring": {"prometheusRule": {"runbookUrl": "wiki page"}}}, "runbookUrl"),
    ({"monitoring": {"prometheusRule": {"alerts": {"WebhookCertificateNotReady": {
        "for": "soon"}}}}}, "for"),
    ({"monitoring": {"prometheusRule": {"alerts": {"WebhookCertificateNotReady": {
        "colour": "red"}}}}}, "colour"),
    ({"sidecar": {"podDisruptionBudget": {"maxUnavailable": 0}}}, "maxUnavailable"),
    ({"sidecar": {"podDisruptionBudget": {"maxUnavailable": "0%"}}}, "maxUnavailable"),
    ({"sidecar": {"podDisruptionBudget": {"enabled": "auto"}}}, "podDisruptionBudget.enabled"),
    ({"sidecar": {"networkPolicy": {"metricsFrom": [{}]}}}, "metricsFrom"),
    ({"sidecar": {"networkPolicy": {"webhookFrom": [{"ipBlock": {}}]}}}, "webhookFrom"),
    ({"sidecar": {"networkPolicy": {"ingress": []}}}, "ingress"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_schema_rejects_bad_values(helm, override, field):
    proc = helm.run("template", "hook", CHART, values=merged(MINIMAL, **override))
    assert proc.returncode != 0, f"accepted {override}"
    assert "schema" in proc.stderr and field in proc.stderr, proc.stderr


# --- against the real API server -----------------------------------------------------------------


def install_crds(cluster):
    """What a cluster with the Prometheus Operator has before the chart comes: the
    Operator's own CRDs (too large for a client-side apply's annotation, so applied
    server-side, as the Operator's docs do)."""
    for path in operator_crds("podmonitors", "servicemonitors", "prometheusrules"):
        cluster.kubectl("apply", "--server-side", "-f", path)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=10s",
                    "crd/podmonitors.monitoring.coreos.com",
                    "crd/servicemonitors.monitoring.coreos.com",
                    "crd/prometheusrules.monitoring.coreos.com")


def resource(obj):
    """What kubectl calls the object's kind: kind.group."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}.{group}" if group else obj["kind"].lower()


def live(cluster, obj):
    """The stored object, read back with kubectl."""
    meta = obj["metadata"]
    return json.loads(cluster.kubectl("get", resource(obj), meta["name"], "-n",
                                      meta["namespace"], "-o", "json").stdout)


def resource_versions(cluster, objects):
    return [live(cluster, obj)["metadata"]["resourceVersion"] for obj in objects]


@pytest.mark.backends("real")
@pytest.mark.parametrize("values", [FULL, with_service_monitor(FULL)],
                         ids=["pod-monitor", "service-monitor"])
def test_rendered_objects_apply(cluster, helm, values):
    stream, objects = template(helm, values)
    cluster.kubectl("create", "namespace", NS)
    install_crds(cluster)
    cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=stream)
    cluster.kubectl("apply", "-f", "-", input=stream)
    for obj in objects:
        if obj["kind"] not in MONITORING_KINDS | {"PodDisruptionBudget", "NetworkPolicy",
                                                  "Service"}:
            continue
        stored = live(cluster, obj)
        assert stored["metadata"]["labels"] == obj["metadata"]["labels"], obj["kind"]
        if obj["kind"] == "Service":
            stored_ports = [{k: p[k] for k in ("name", "port", "targetPort", "protocol")}
                            for p in stored["spec"]["ports"]]
            assert stored_ports == obj["spec"]["ports"]
        else:
            # Nothing pruned: every rendered field is one the kind has.
            assert stored["spec"] == obj["spec"], obj["kind"]
    # Applied again, nothing changes.
    namespaced = [obj for obj in objects if obj["metadata"].get("namespace")]
    before = resource_versions(cluster, namespaced)
    cluster.kubectl("apply", "-f", "-", input=stream)
    assert resource_versions(cluster, namespaced) == before


@pytest.mark.backends("real")
def test_without_the_operators_crds_the_monitoring_kinds_are_unknown(cluster, helm):
    values = merged(MINIMAL, monitoring={"podMonitor": {"enabled": True},
                                         "prometheusRule": {"enabled": True}})
    stream, _ = template(helm, values)
    cluster.kubectl("create", "namespace", NS)
    proc = cluster.kubectl("apply", "-f", "-", input=stream, check=False)
    assert proc.returncode != 0
    assert 'no matches for kind "PodMonitor" in version "monitoring.coreos.com/v1"' in \
        proc.stderr, proc.stderr
    assert 'no matches for kind "PrometheusRule"' in proc.stderr, proc.stderr


@pytest.mark.backends("real")
def test_the_crds_refuse_what_the_operator_refuses(cluster):
    install_crds(cluster)
    bad = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
           "metadata": {"name": "bad", "namespace": "default"},
           "spec": {"selector": {}, "podMetricsEndpoints": [{"port": "metrics",
                                                             "interval": "30 s"}]}}
    proc = cluster.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert proc.returncode != 0
    assert "spec.podMetricsEndpoints[0].interval in body should match" in proc.stderr


def docs_blocks(language, after):
    with open(MONITORING_DOC, encoding="utf-8") as f:
        doc = f.read()
    section = doc[doc.index(after):]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


@pytest.mark.backends("real")
def test_the_docs_recipe_for_raw_manifests_applies(cluster):
    install_crds(cluster)
    cluster.kubectl("create", "namespace", "example-system")
    [pod_monitor] = docs_blocks("yaml", "## Raw manifests")
    cluster.kubectl("apply", "-f", "-", input=pod_monitor)
    [recipe] = docs_blocks("sh", "## Raw manifests")
    env = dict(os.environ, KUBECONFIG=cluster.kubeconfig(),
               KUBECACHEDIR=os.path.join(cluster.state_dir, "recipe-cache"))
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", recipe], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "prometheusrule.monitoring.coreos.com/certctl created"
    stored = json.loads(cluster.kubectl("get", "prometheusrule", "certctl", "-n",
                                        "example-system", "-o", "json").stdout)
    assert stored["spec"] == rule_file()


@pytest.mark.backends("real")
def test_notes_name_the_monitoring_objects(cluster, helm):
    # A client-side dry run renders NOTES.txt (helm template does not); it only reads the
    # server's version and discovery, which must know the Operator's kinds.
    install_crds(cluster)
    for values, expected in (
            (FULL, [f"Scraped by the PodMonitor {NS}/{RELEASE}-certctl every 15s.",
                    f"Alerts: the PrometheusRule {NS}/{RELEASE}-certctl",
                    f"PodDisruptionBudget {NS}/hook: evictions take at most 34% pod(s) at a "
                    "time.",
                    f"NetworkPolicy {NS}/hook: ingress only to port 9443, 8080 (metrics), "
                    "8081 (health) and the extraIngress rules."]),
            (with_service_monitor(FULL),
             [f"Scraped by the ServiceMonitor {NS}/{RELEASE}-certctl (Service {NS}/hook-metrics)"
              " every 15s."])):
        proc = helm.run("install", RELEASE, CHART, "--namespace", NS, "--dry-run=client",
                        "--kubeconfig", cluster.kubeconfig(), values=values)
        assert proc.returncode == 0, proc.stderr
        notes = proc.stdout[proc.stdout.index("NOTES:"):]
        for line in expected:
            assert line in notes, notes
    proc = helm.run("install", RELEASE, CHART, "--namespace", NS, "--dry-run=client",
                    "--kubeconfig", cluster.kubeconfig(), values=MINIMAL)
    notes = proc.stdout[proc.stdout.index("NOTES:"):]
    for word in ("PodMonitor", "ServiceMonitor", "PrometheusRule", "PodDisruptionBudget",
                 "NetworkPolicy"):
        assert word not in notes, notes


@pytest.mark.backends("real")
@pytest.mark.parametrize("values", [FULL, with_service_monitor(FULL)],
                         ids=["pod-monitor", "service-monitor"])
def test_helm_install_creates_and_uninstall_removes_every_object(cluster, helm, values):
    cluster.kubectl("create", "namespace", NS)
    install_crds(cluster)
    _, objects = template(helm, values)
    ours = [obj for obj in objects if obj["kind"] in MONITORING_KINDS | {
        "PodDisruptionBudget", "NetworkPolicy", "Service"}]
    # No --wait: the emulator stores the Deployment but runs no pods.
    proc = helm.run("install", RELEASE, CHART, "--namespace", NS,
                    kubeconfig=cluster.kubeconfig(), values=values)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for obj in ours:
        assert live(cluster, obj)["metadata"]["annotations"]["meta.helm.sh/release-name"] == \
            RELEASE, obj["kind"]
    # --keep-history: purging the release record is a DELETE with a protobuf DeleteOptions
    # body, which the emulator cannot decode.
    proc = helm.run("uninstall", "--keep-history", RELEASE, "--namespace", NS,
                    kubeconfig=cluster.kubeconfig())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for obj in ours:
        assert cluster.kubectl("get", resource(obj), "-n", NS, "-o", "name").stdout == "", \
            resource(obj)
