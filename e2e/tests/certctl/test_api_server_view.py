"""The API server's view of the targets: the name it verifies for each webhook entry, CRD
conversion webhook and APIService (`NAME.NAMESPACE.svc` for a Service, the host of a URL),
whether the certificate covers it, and whether the Service called exists, has the port and
a ready endpoint.

- `certctl check`: `target-name-not-covered`, `service-missing`, `service-port-missing`,
  `no-ready-endpoints`, notes for Service reads it may not make, the names to cover taken
  from the targets when no flag names any, and one JSON document even when it cannot run;
- `certctl job`: exit 1 naming an uncovered URL host (IPv4, DNS, IPv6 literal) after writing
  the bundle; `--failure-policy-once-ready Fail`;
- `certctl run`: the `callable` readiness check, one Warning Event per distinct finding, the
  `certctl_target_call_findings` gauge, and `--failure-policy-once-ready Fail` once the
  webhook serves.

Every wait polls (every 50 or 100 ms) under a bound; nothing sleeps to wait for state.
"""

import base64
import copy
import datetime
import json
import os
import signal
import subprocess
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.certctl import (api_service, b64, crd, read_only, run_certctl,
                             service_with_endpoints, webhook_configuration, what_to_do)
from harness.rbac import emulator_rules
from harness.sidecar import Sidecar, WebhookServer, free_ports, stop_all
from harness.waiting import wait_for

NS = "demo"
SECRET = "webhook-server-cert"
VWC = "ValidatingWebhookConfiguration"
MWC = "MutatingWebhookConfiguration"
USER = f"system:serviceaccount:{NS}:certctl"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}

BOUND = 20.0   # overall bound of a wait for start-up (a loaded 2-core machine)

NAMES_B = "hook-b.demo.svc, hook-b, hook-b.demo, hook-b.demo.svc.cluster.local"
NAMES_HOOK = "hook.demo.svc, hook, hook.demo, hook.demo.svc.cluster.local"
NO_SAN_NOTE = ("note: no SAN was checked: name what the certificate must cover with --service, "
               "--dns-name or --ip, or give the targets whose calls it must serve")


# --- setup ------------------------------------------------------------------------------

def checker_rules(namespaces=(NS,), services=True, endpointslices=True):
    """What `check` reads: the Secret, the targets, and (unless left out, to provoke a 403)
    the Services the targets call and their EndpointSlices."""
    rules = [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
         "resourceNames": [SECRET], "namespaces": [NS]},
        {"verbs": ["get", "list"], "apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]},
        {"verbs": ["get"], "apiGroups": ["apiextensions.k8s.io"],
         "resources": ["customresourcedefinitions"]},
        {"verbs": ["get"], "apiGroups": ["apiregistration.k8s.io"],
         "resources": ["apiservices"]},
    ]
    if services:
        rules.append({"verbs": ["get"], "apiGroups": [""], "resources": ["services"],
                      "namespaces": list(namespaces)})
    if endpointslices:
        rules.append({"verbs": ["list"], "apiGroups": ["discovery.k8s.io"],
                      "resources": ["endpointslices"], "namespaces": list(namespaces)})
    return rules


def apply(cluster, *objects):
    for obj in objects:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))


def replace(cluster, obj):
    cluster.kubectl("replace", "-f", "-", input=json.dumps(obj))


def generate_secret(cluster, binary, service, *args):
    """A certctl-managed Secret for `service` in NS, put there with kubectl; returns the
    decoded data."""
    made = run_certctl(binary, "generate", "--service", service, "-n", NS, *args,
                       "-o", "secret-json", "--log-level", "off")
    assert made.returncode == 0, made.stderr
    cluster.kubectl("apply", "-f", "-", input=made.stdout)
    return {k: base64.b64decode(v).decode() for k, v in json.loads(made.stdout)["data"].items()}


def vwc(name, webhooks, ca="", service="hook", namespace=NS, policies=None):
    obj = webhook_configuration(VWC, name, webhooks, ca_bundle=ca, service=service,
                                namespace=namespace)
    for entry, policy in zip(obj["webhooks"], policies or ()):
        entry["failurePolicy"] = policy
    return obj


def with_urls(obj, *urls, ca=""):
    """`obj` with its entries calling these URLs instead of a Service."""
    out = copy.deepcopy(obj)
    for entry, url in zip(out["webhooks"], urls):
        entry["clientConfig"] = {"url": url, **({"caBundle": b64(ca)} if ca else {})}
    return out


def get(cluster, kind, name, namespace=None):
    args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    return json.loads(cluster.kubectl(*args).stdout)


def policies(cluster, name="hook"):
    return [w.get("failurePolicy") for w in
            get(cluster, "validatingwebhookconfiguration", name)["webhooks"]]


def check(cluster, binary, *args, user="checker", targets=("--validating-webhook", "hook")):
    return run_certctl(binary, "check", "--secret", SECRET, "-n", NS, *targets,
                       "--kubeconfig", cluster.kubeconfig(user), *args)


def report(result):
    """The JSON report minus the certificates, which other tests cover."""
    doc = json.loads(result.stdout)
    doc.pop("certificates", None)
    return doc


def lines(result):
    return result.stdout.splitlines()


@pytest.fixture
def demo(cluster):
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user("checker", checker_rules())
    return cluster


# --- check: the name each entry calls ---------------------------------------------------

@pytest.mark.backends("real")
def test_check_names_every_entry_whose_called_name_is_not_covered(demo, certctl_binary):
    """A certificate for hook-b; a webhook, a CRD and an APIService calling hook-a, and two
    url entries (IPv4, IPv6): each is a finding with the name the API server verifies. An
    entry calling hook-b beside them passes."""
    ca = generate_secret(demo, certctl_binary, "hook-b")["ca.crt"]
    apply(demo, *service_with_endpoints("hook-a", NS), *service_with_endpoints("hook-b", NS),
          vwc("hook-a", ["check.example.com"], ca, service="hook-a"),
          vwc("hook-b", ["ok.example.com"], ca, service="hook-b"),
          with_urls(webhook_configuration(MWC, "urls", ["x.example.com", "y.example.com"]),
                    "https://10.0.0.5:8443/v", "https://[fd00::10]:8443/x", ca=ca),
          crd("widgets.hook.io", ca_bundle=ca, service="hook-a", namespace=NS),
          api_service("metrics.hook.io", ca_bundle=ca, service="hook-a", namespace=NS))
    targets = ("--validating-webhook", "hook-a", "--validating-webhook", "hook-b",
               "--mutating-webhook", "urls", "--crd", "widgets.hook.io",
               "--apiservice", "v1.metrics.hook.io")
    demo.reset_request_log()

    text = check(demo, certctl_binary, "--service", "hook-b", targets=targets)
    assert text.returncode == 1, text.stdout + text.stderr
    assert text.stderr == ""
    assert lines(text) == [
        "validatingwebhookconfiguration/hook-a: webhooks[0] (check.example.com) calls "
        f"hook-a.demo.svc, which the certificate does not name (it names {NAMES_B}) "
        "[target-name-not-covered]",
        "mutatingwebhookconfiguration/urls: webhooks[0] (x.example.com) calls "
        "https://10.0.0.5:8443/v, whose host 10.0.0.5 the certificate does not name "
        f"(it names {NAMES_B}) [target-name-not-covered]",
        "mutatingwebhookconfiguration/urls: webhooks[1] (y.example.com) calls "
        "https://[fd00::10]:8443/x, whose host fd00::10 the certificate does not name "
        f"(it names {NAMES_B}) [target-name-not-covered]",
        "customresourcedefinition/widgets.hook.io: spec.conversion.webhook calls "
        f"hook-a.demo.svc, which the certificate does not name (it names {NAMES_B}) "
        "[target-name-not-covered]",
        "apiservice/v1.metrics.hook.io: spec.service calls hook-a.demo.svc, which the "
        f"certificate does not name (it names {NAMES_B}) [target-name-not-covered]",
        what_to_do("target-name-not-covered"),
    ]

    result = check(demo, certctl_binary, "--service", "hook-b", "-o", "json", targets=targets)
    assert result.returncode == 1, result.stderr
    doc = report(result)
    assert doc["ok"] is False
    assert [(t["kind"], t["name"], t["webhook"], t["calls"], t["ok"]) for t in doc["targets"]] == [
        (VWC, "hook-a", "check.example.com", "hook-a.demo.svc", False),
        (VWC, "hook-b", "ok.example.com", "hook-b.demo.svc", True),
        (MWC, "urls", "x.example.com", "https://10.0.0.5:8443/v", False),
        (MWC, "urls", "y.example.com", "https://[fd00::10]:8443/x", False),
        ("CustomResourceDefinition", "widgets.hook.io", "", "hook-a.demo.svc", False),
        ("APIService", "v1.metrics.hook.io", "", "hook-a.demo.svc", False),
    ]
    assert [(f["code"], f["object"]) for f in doc["findings"]] == [
        ("target-name-not-covered", "validatingwebhookconfiguration/hook-a"),
        ("target-name-not-covered", "mutatingwebhookconfiguration/urls"),
        ("target-name-not-covered", "mutatingwebhookconfiguration/urls"),
        ("target-name-not-covered", "customresourcedefinition/widgets.hook.io"),
        ("target-name-not-covered", "apiservice/v1.metrics.hook.io"),
    ]
    # The JSON messages are the text lines without object and code.
    assert [f"{f['object']}: {f['message']} [{f['code']}]" for f in doc["findings"]] == \
        lines(text)[:-1]
    assert doc["notes"] == []

    only_reads, verbs = read_only(demo.request_log(), "checker")
    assert only_reads, verbs
    assert demo.writes() == []


# --- check: the Service each entry calls ------------------------------------------------

@pytest.mark.backends("real")
def test_check_reports_a_missing_service_and_a_missing_port(demo, certctl_binary):
    ca = generate_secret(demo, certctl_binary, "hook")["ca.crt"]
    hook = vwc("hook", ["a.example.com"], ca)
    apply(demo, hook)

    missing = check(demo, certctl_binary, "--service", "hook", "-o", "json")
    assert missing.returncode == 1, missing.stderr
    assert report(missing)["findings"] == [{
        "code": "service-missing", "object": f"service/{NS}/hook",
        "message": "does not exist; validatingwebhookconfiguration/hook webhooks[0] "
                   "(a.example.com) calls it"}]
    assert [t["ok"] for t in report(missing)["targets"]] == [False]

    apply(demo, *service_with_endpoints("hook", NS))  # port 443
    on_8443 = copy.deepcopy(hook)
    on_8443["webhooks"][0]["clientConfig"]["service"]["port"] = 8443
    apply(demo, on_8443)
    wrong_port = check(demo, certctl_binary, "--service", "hook")
    assert wrong_port.returncode == 1, wrong_port.stderr
    assert lines(wrong_port) == [
        f"service/{NS}/hook: has no port 8443 (it has 443); validatingwebhookconfiguration/hook "
        "webhooks[0] (a.example.com) calls port 8443 [service-port-missing]",
        what_to_do("service-port-missing")]

    # An entry that names no port calls 443.
    without_port = copy.deepcopy(hook)
    del without_port["webhooks"][0]["clientConfig"]["service"]["port"]
    replace(demo, without_port)
    fine = check(demo, certctl_binary, "--service", "hook")
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert len(lines(fine)) == 1 and lines(fine)[0].startswith("ok: "), fine.stdout
    assert lines(fine)[0].endswith("1 caBundle(s) up to date, every name they call covered")


@pytest.mark.backends("real")
def test_check_reports_a_service_without_a_ready_endpoint(demo, certctl_binary):
    """Ready means conditions.ready is not false; a slice listing ports counts only if it
    lists the Service port's name; only slices labelled with the Service's name count."""
    ca = generate_secret(demo, certctl_binary, "hook")["ca.crt"]
    service, slice_ = service_with_endpoints("hook", NS, port_name="https")
    apply(demo, vwc("hook", ["a.example.com"], ca), service)
    no_ready = [f"service/{NS}/hook: has no ready endpoint for port 443 (no EndpointSlice lists "
                "one), so the API server's calls from validatingwebhookconfiguration/hook "
                "webhooks[0] (a.example.com) cannot connect [no-ready-endpoints]",
                what_to_do("no-ready-endpoints")]

    def verdict(slice_obj):
        apply(demo, slice_obj)
        result = check(demo, certctl_binary, "--service", "hook")
        assert result.returncode in (0, 1), result.stderr
        return result.returncode, lines(result) if result.returncode else []

    # No EndpointSlice at all.
    result = check(demo, certctl_binary, "--service", "hook")
    assert (result.returncode, lines(result)) == (1, no_ready)

    not_ready = copy.deepcopy(slice_)
    not_ready["endpoints"] = [{"addresses": ["10.244.0.10"], "conditions": {"ready": False}}]
    assert verdict(not_ready) == (1, no_ready)

    other_port = copy.deepcopy(slice_)
    other_port["ports"][0]["name"] = "metrics"
    assert verdict(other_port) == (1, no_ready)

    # A slice of another Service does not count, however ready.
    foreign = copy.deepcopy(slice_)
    foreign["metadata"]["labels"]["kubernetes.io/service-name"] = "other"
    demo.kubectl("delete", "endpointslice", slice_["metadata"]["name"], "-n", NS)
    assert verdict(foreign) == (1, no_ready)

    # Controls: no ready condition (ready), one ready beside one not, a slice without ports.
    no_condition = copy.deepcopy(slice_)
    no_condition["endpoints"] = [{"addresses": ["10.244.0.10"], "conditions": {}}]
    assert verdict(no_condition) == (0, [])
    mixed = copy.deepcopy(slice_)
    mixed["endpoints"] = [{"addresses": ["10.244.0.10"], "conditions": {"ready": False}},
                          {"addresses": ["10.244.0.11"], "conditions": {"ready": True}}]
    assert verdict(mixed) == (0, [])
    portless = copy.deepcopy(slice_)
    del portless["ports"]
    replace(demo, portless)
    result = check(demo, certctl_binary, "--service", "hook")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.backends("real")
def test_check_turns_forbidden_service_reads_into_notes(demo, certctl_binary):
    ca = generate_secret(demo, certctl_binary, "hook")["ca.crt"]
    apply(demo, *service_with_endpoints("hook", NS), vwc("hook", ["a.example.com"], ca))
    demo.add_user("no-services", checker_rules(services=False))
    demo.add_user("no-slices", checker_rules(endpointslices=False))
    no_services, no_slices = demo.username("no-services"), demo.username("no-slices")
    service_note = (
        f"note: could not read service/{NS}/hook (get services {NS}/hook: services \"hook\" is "
        f"forbidden: User \"{no_services}\" cannot get resource \"services\" in API group \"\" in "
        f"the namespace \"{NS}\"), so whether the API server can reach it was not checked")
    slices_note = (
        f"note: could not read the EndpointSlices of service/{NS}/hook (list endpointslices in "
        f"namespace {NS}: endpointslices.discovery.k8s.io is forbidden: User \"{no_slices}\" "
        f"cannot list resource \"endpointslices\" in API group \"discovery.k8s.io\" in the "
        f"namespace \"{NS}\"), so whether the API server can reach it was not checked")

    text = check(demo, certctl_binary, "--service", "hook", user="no-services")
    assert text.returncode == 0, text.stdout + text.stderr
    assert lines(text)[0].startswith(f"ok: secret {NS}/{SECRET}")
    assert lines(text)[1:] == [service_note]
    result = check(demo, certctl_binary, "--service", "hook", "-o", "json", user="no-services")
    assert result.returncode == 0, result.stderr
    doc = report(result)
    assert doc["ok"] is True and doc["findings"] == []
    assert doc["notes"] == [service_note[len("note: "):]]

    text = check(demo, certctl_binary, "--service", "hook", user="no-slices")
    assert text.returncode == 0, text.stdout + text.stderr
    assert lines(text)[1:] == [slices_note]

    # A finding comes first, the note after it; the finding alone sets the exit code.
    apply(demo, vwc("hook", ["a.example.com"], ca, service="hook-a"))
    both = check(demo, certctl_binary, "--service", "hook", user="no-services")
    assert both.returncode == 1, both.stderr
    assert lines(both) == [
        "validatingwebhookconfiguration/hook: webhooks[0] (a.example.com) calls "
        f"hook-a.demo.svc, which the certificate does not name (it names {NAMES_HOOK}) "
        "[target-name-not-covered]",
        what_to_do("target-name-not-covered"),
        f"note: could not read service/{NS}/hook-a (get services {NS}/hook-a: services "
        f"\"hook-a\" is forbidden: User \"{no_services}\" cannot get resource \"services\" in "
        f"API group \"\" in the namespace \"{NS}\"), so whether the API server can reach it "
        "was not checked"]


# --- check: which names must be covered ---------------------------------------------------

@pytest.mark.backends("real")
def test_check_without_names_holds_the_certificate_to_what_the_targets_call(demo,
                                                                           certctl_binary):
    ca = generate_secret(demo, certctl_binary, "hook")["ca.crt"]
    apply(demo, *service_with_endpoints("hook", NS), *service_with_endpoints("hook-a", NS),
          vwc("hook", ["a.example.com"], ca))

    covered = check(demo, certctl_binary)  # no --service, --dns-name or --ip
    assert covered.returncode == 0, covered.stdout + covered.stderr
    assert len(lines(covered)) == 1, covered.stdout
    assert lines(covered)[0].startswith(f"ok: secret {NS}/{SECRET}")
    assert lines(covered)[0].endswith("every name they call covered")

    demo.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                 json.dumps([{"op": "replace", "path": "/webhooks/0/clientConfig/service/name",
                              "value": "hook-a"}]))
    uncovered = check(demo, certctl_binary, "-o", "json")
    assert uncovered.returncode == 1, uncovered.stderr
    doc = report(uncovered)
    assert doc["findings"] == [{
        "code": "target-name-not-covered", "object": "validatingwebhookconfiguration/hook",
        "message": "webhooks[0] (a.example.com) calls hook-a.demo.svc, which the certificate "
                   f"does not name (it names {NAMES_HOOK})"}]
    assert doc["notes"] == []

    # Neither names nor targets: nothing to hold the SANs to, and the output says so.
    bare = check(demo, certctl_binary, targets=())
    assert bare.returncode == 0, bare.stdout + bare.stderr
    assert len(lines(bare)) == 2 and lines(bare)[0].startswith(f"ok: secret {NS}/{SECRET}")
    assert lines(bare)[1] == NO_SAN_NOTE
    # Given a name, there is something to check: no note.
    named = check(demo, certctl_binary, "--service", "hook", targets=())
    assert named.returncode == 0, named.stdout + named.stderr
    assert len(lines(named)) == 1 and lines(named)[0].startswith("ok: ")


@pytest.mark.backends("real")
def test_check_json_is_one_document_when_check_cannot_run(demo, certctl_binary, tmp_path):
    generate_secret(demo, certctl_binary, "hook")
    demo.add_user("nobody", [])
    with open(demo.kubeconfig("checker"), encoding="utf-8") as f:
        config = json.load(f)
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable = tmp_path / "unreachable.kubeconfig"
    unreachable.write_text(json.dumps(config))
    # A folder whose tls.crt cannot be read as a file.
    unreadable = tmp_path / "unreadable"
    (unreadable / "tls.crt").mkdir(parents=True)
    (unreadable / "tls.key").write_text("key")
    (unreadable / "ca.crt").write_text("ca")

    cases = {
        # The flag is refused before -o is read: JSON all the same.
        "unknown flag": (run_certctl(certctl_binary, "check", "--bogus", "-o", "json"),
                         "unknown flag --bogus"),
        "bad value": (run_certctl(certctl_binary, "check", "-o", "json", "--renew-before",
                                  "soon"),
                      '--renew-before: invalid duration "soon"'),
        "unreachable": (run_certctl(certctl_binary, "check", "-n", NS, "--kubeconfig",
                                    str(unreachable), "--request-timeout", "2s", "-o", "json"),
                        "connect to 127.0.0.1 port 1"),
        "forbidden": (check(demo, certctl_binary, "-o", "json", user="nobody"),
                      f'secrets "{SECRET}" is forbidden: User "{demo.username("nobody")}" '
                      f'cannot get resource "secrets" in API group "" in the namespace "{NS}"'),
        "missing folder": (run_certctl(certctl_binary, "check", "--cert-dir",
                                       str(tmp_path / "absent"), "-o", "json"),
                           f"certificate folder {tmp_path / 'absent'} does not exist"),
        "unreadable file": (run_certctl(certctl_binary, "check", "--cert-dir", str(unreadable),
                                        "-o", "json"),
                            f"cannot read {unreadable / 'tls.crt'}"),
    }
    for what, (result, wanted) in cases.items():
        assert result.returncode == 2, (what, result.stdout, result.stderr)
        doc = json.loads(result.stdout)  # fails on anything beside the one document
        assert set(doc) == {"ok", "error"}, (what, doc)
        assert doc["ok"] is False, (what, doc)
        assert "\n" not in doc["error"] and wanted in doc["error"], (what, doc)
        assert result.stderr == f"certctl check: {doc['error']}\n", (what, result.stderr)


# --- check: an external certificate with a wildcard SAN, another namespace ----------------

def openssl_wildcard_pair(tmp_path, san):
    """An external pair made with the openssl CLI: its own CA, and a leaf whose only SAN is
    `san` (a wildcard), CN without a name."""
    ca_key, ca_crt = tmp_path / "ca.key", tmp_path / "ca.crt"
    key, csr, crt, ext = (tmp_path / name for name in ("tls.key", "tls.csr", "tls.crt", "ext"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
                    "-out", ca_crt, "-days", "3650", "-subj", "/CN=wildcard-ca",
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
                    csr, "-subj", "/CN=wildcard"], check=True, capture_output=True)
    ext.write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                   f"subjectAltName=DNS:{san}\n")
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
                    "-CAcreateserial", "-out", crt, "-days", "365", "-extfile", ext],
                   check=True, capture_output=True)
    return {"ca.crt": ca_crt.read_text(), "tls.crt": crt.read_text(), "tls.key": key.read_text()}


@pytest.mark.backends("real")
def test_an_external_wildcard_covers_exactly_one_label_in_any_case(demo, certctl_binary,
                                                                   tmp_path):
    pair = openssl_wildcard_pair(tmp_path, "*.demo.svc")
    apply(demo, {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                 "metadata": {"name": SECRET, "namespace": NS},  # no managed-by label
                 "data": {key: b64(value) for key, value in pair.items()}},
          *service_with_endpoints("hook-a", NS))
    ca = pair["ca.crt"]
    hook = vwc("hook", ["a.example.com"], ca, service="hook-a")
    apply(demo, hook)

    covered = check(demo, certctl_binary, "-o", "json")
    assert covered.returncode == 0, covered.stdout + covered.stderr
    doc = report(covered)
    assert doc["findings"] == [] and doc["notes"] == []
    assert [(t["calls"], t["ok"]) for t in doc["targets"]] == [("hook-a.demo.svc", True)]

    def verdict(url):
        replace(demo, with_urls(hook, url, ca=ca))
        return check(demo, certctl_binary)

    two_labels = verdict("https://a.b.demo.svc/x")
    assert two_labels.returncode == 1, two_labels.stderr
    assert lines(two_labels) == [
        "validatingwebhookconfiguration/hook: webhooks[0] (a.example.com) calls "
        "https://a.b.demo.svc/x, whose host a.b.demo.svc the certificate does not name "
        "(it names *.demo.svc) [target-name-not-covered]",
        what_to_do("target-name-not-covered")]
    no_label = verdict("https://demo.svc/x")
    assert no_label.returncode == 1, no_label.stderr
    assert "whose host demo.svc the certificate does not name" in no_label.stdout
    other_case = verdict("https://Hook-A.DEMO.Svc:443/x")
    assert other_case.returncode == 0, other_case.stdout + other_case.stderr
    assert "every name they call covered" in other_case.stdout


@pytest.mark.backends("real")
def test_a_service_in_another_namespace_is_not_covered(demo, certctl_binary):
    ca = generate_secret(demo, certctl_binary, "hook")["ca.crt"]
    demo.kubectl("create", "namespace", "other")
    demo.add_user("checker", checker_rules(namespaces=(NS, "other")))
    apply(demo, *service_with_endpoints("hook", NS), *service_with_endpoints("hook", "other"),
          vwc("hook", ["a.example.com"], ca, namespace="other"))

    for names in ((), ("--service", "hook")):
        result = check(demo, certctl_binary, *names, "-o", "json")
        assert result.returncode == 1, (names, result.stderr)
        doc = report(result)
        assert [(t["calls"], t["ok"]) for t in doc["targets"]] == [("hook.other.svc", False)]
        # The Service in `other` exists and has a ready endpoint: the name is all that fails.
        assert doc["findings"] == [{
            "code": "target-name-not-covered", "object": "validatingwebhookconfiguration/hook",
            "message": "webhooks[0] (a.example.com) calls hook.other.svc, which the certificate "
                       f"does not name (it names {NAMES_HOOK})"}], names


# --- job ----------------------------------------------------------------------------------

# The chart's grant with failurePolicyOnceReady: certctl may read the webhook's Service and
# its EndpointSlices, to set Fail only where the API server can call.
FAIL_CLOSED = {"failurePolicyOnceReady": "Fail", "webhook": {"service": "hook"}}


def callable_service(cluster):
    """The webhook's Service "hook" with one ready endpoint: what Fail needs besides the name."""
    apply(cluster, *service_with_endpoints("hook", NS))

@pytest.fixture
def job_user(demo):
    demo.add_user(USER, emulator_rules("job", SECRET, NS, {"validatingWebhooks": ["hook"]},
                                       top=FAIL_CLOSED))
    return demo


def job(cluster, binary, *args):
    """certctl job in a pod as the certctl service account, target VWC hook."""
    return run_certctl(binary, "job", "--service", "hook", "--validating-webhook", "hook",
                       *args, env=cluster.in_cluster_env(USER, NS))


def bundles(cluster):
    return [base64.b64decode(w["clientConfig"].get("caBundle", "")).decode()
            for w in get(cluster, "validatingwebhookconfiguration", "hook")["webhooks"]]


def secret_data(cluster):
    data = get(cluster, "secret", SECRET, NS)["data"]
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def sans(pem):
    return subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName"], input=pem,
                          capture_output=True, text=True, check=True).stdout


def last_line(result):
    return result.stderr.strip().splitlines()[-1]


FAILED_CALLS = ("certctl job: the CA bundle is injected, but the API server cannot call every "
                "target: ")


@pytest.mark.backends("real")
def test_job_fails_on_a_url_host_the_certificate_does_not_name(job_user, certctl_binary):
    apply(job_user, with_urls(vwc("hook", ["x.example.com"]), "https://10.0.0.5:8443/v"))
    result = job(job_user, certctl_binary)
    assert result.returncode == 1, result.stderr
    assert last_line(result) == (
        f"{FAILED_CALLS}validatingwebhookconfiguration/hook: webhooks[0] (x.example.com) calls "
        "https://10.0.0.5:8443/v, whose host 10.0.0.5 the certificate does not name "
        f"(it names {NAMES_HOOK})")
    ca = secret_data(job_user)["ca.crt"]
    assert bundles(job_user) == [ca]  # written all the same

    covered = job(job_user, certctl_binary, "--ip", "10.0.0.5")
    assert covered.returncode == 0, covered.stderr
    assert "IP Address:10.0.0.5" in sans(secret_data(job_user)["tls.crt"])

    # A DNS host the same way: not named until --dns-name names it.
    replace(job_user, with_urls(vwc("hook", ["x.example.com"]),
                                "https://webhook.example.com:8443/v"))
    result = job(job_user, certctl_binary, "--ip", "10.0.0.5")
    assert result.returncode == 1, result.stderr
    assert ("calls https://webhook.example.com:8443/v, whose host webhook.example.com the "
            "certificate does not name") in last_line(result)
    covered = job(job_user, certctl_binary, "--ip", "10.0.0.5", "--dns-name",
                  "webhook.example.com")
    assert covered.returncode == 0, covered.stderr
    assert "DNS:webhook.example.com" in sans(secret_data(job_user)["tls.crt"])


@pytest.mark.backends("real")
def test_job_matches_an_ipv6_url_host_without_brackets(job_user, certctl_binary):
    apply(job_user, with_urls(vwc("hook", ["x.example.com"]), "https://[fd00::10]:8443/x"))
    result = job(job_user, certctl_binary)
    assert result.returncode == 1, result.stderr
    assert last_line(result) == (
        f"{FAILED_CALLS}validatingwebhookconfiguration/hook: webhooks[0] (x.example.com) calls "
        "https://[fd00::10]:8443/x, whose host fd00::10 the certificate does not name "
        f"(it names {NAMES_HOOK})")
    assert bundles(job_user) == [secret_data(job_user)["ca.crt"]]

    covered = job(job_user, certctl_binary, "--ip", "fd00::10")
    assert covered.returncode == 0, covered.stderr
    assert "IP Address:FD00:0:0:0:0:0:0:10" in sans(secret_data(job_user)["tls.crt"])
    checked = run_certctl(certctl_binary, "check", "--validating-webhook", "hook", "--service",
                          "hook", "--ip", "fd00::10", "-o", "json",
                          env=job_user.in_cluster_env(USER, NS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert [(t["calls"], t["ok"]) for t in report(checked)["targets"]] == [
        ("https://[fd00::10]:8443/x", True)]


def writes_by(cluster, user):
    return [(e["verb"], e["method"], e["resource"], e["name"])
            for e in cluster.request_log()["writes"] if e["user"] == user]


@pytest.mark.backends("real")
def test_job_fails_closed_once_ready_and_then_writes_nothing(job_user, certctl_binary):
    callable_service(job_user)
    apply(job_user, vwc("hook", ["a.example.com", "b.example.com"],
                        policies=["Ignore", "Fail"]))
    # Without the flag the policies are left as they are.
    assert job(job_user, certctl_binary).returncode == 0
    assert policies(job_user) == ["Ignore", "Fail"]
    before = get(job_user, "validatingwebhookconfiguration", "hook")

    job_user.reset_request_log()
    result = job(job_user, certctl_binary, "--failure-policy-once-ready", "Fail")
    assert result.returncode == 0, result.stderr
    assert ("set failurePolicy Fail on 1 webhook entry that had Ignore: "
            "validatingwebhookconfiguration/hook") in result.stderr, result.stderr
    assert policies(job_user) == ["Fail", "Fail"]
    assert writes_by(job_user, USER) == [
        ("patch", "PATCH", "validatingwebhookconfigurations", "hook")]
    assert [e["user"] for e in job_user.request_log()["writes"]] == [USER]
    after = get(job_user, "validatingwebhookconfiguration", "hook")
    before["webhooks"][0]["failurePolicy"] = "Fail"  # the only change
    for obj in (before, after):
        obj["metadata"] = {}
    assert after == before

    job_user.reset_request_log()
    again = job(job_user, certctl_binary, "--failure-policy-once-ready", "Fail")
    assert again.returncode == 0, again.stderr
    assert job_user.request_log()["writes"] == []


@pytest.mark.backends("real")
def test_job_refuses_ignore_and_leaves_ignore_when_not_callable(job_user, certctl_binary):
    callable_service(job_user)
    apply(job_user, vwc("hook", ["a.example.com", "b.example.com"],
                        policies=["Ignore", "Ignore"]))
    job_user.reset_request_log()
    refused = job(job_user, certctl_binary, "--failure-policy-once-ready", "Ignore")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("certctl job: --failure-policy-once-ready: "), refused.stderr
    assert job_user.request_log()["writes"] == []

    # The second entry calls a name the certificate lacks: not ready, so no Fail anywhere.
    job_user.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                     json.dumps([{"op": "replace", "path": "/webhooks/1/clientConfig/service/name",
                                  "value": "other"}]))
    result = job(job_user, certctl_binary, "--failure-policy-once-ready", "Fail")
    assert result.returncode == 1, result.stderr
    assert last_line(result).startswith(FAILED_CALLS)
    assert "webhooks[1] (b.example.com) calls other.demo.svc" in last_line(result)
    assert policies(job_user) == ["Ignore", "Ignore"]
    assert bundles(job_user) == [secret_data(job_user)["ca.crt"]] * 2


# --- run ----------------------------------------------------------------------------------

@pytest.fixture
def sidecars(cluster, certctl_binary, tmp_path):
    """start(target, *args, service=...) starts a `certctl run` in NS with the chart's RBAC
    for VWC `target`; every process started is stopped when the test ends."""
    started = []

    def start(target, *args, service="hook", name="a"):
        cluster.add_user(USER, emulator_rules("sidecar", SECRET, NS,
                                              {"validatingWebhooks": [target]},
                                              {"leaderElection": False}, FAIL_CLOSED))
        sidecar = Sidecar(certctl_binary, cluster, str(tmp_path), name, USER,
                          ["--validating-webhook", target, *args], namespace=NS,
                          service=service)
        started.append(sidecar)
        return sidecar.start()

    yield start
    stop_all(started)



def metric(sidecar, name, **labels):
    for family in text_string_to_metric_families(sidecar.metrics()[0]):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    raise AssertionError(f"no sample {name}{labels}")


def passes(sidecar):
    """Reconcile passes finished so far, whatever their result."""
    total = 0
    for family in text_string_to_metric_families(sidecar.metrics()[0]):
        total += sum(s.value for s in family.samples if s.name == "certctl_reconcile_total")
    return total


def requests_by(cluster, user):
    return [e for e in cluster.request_log()["requests"] if e["user"] == user]


def wait_quiet(cluster, sidecar, quiet=0.5):
    """Until the sidecar has sent no request for `quiet` seconds: no pass is running and
    whatever a pass records (Events) has landed."""
    state = {"count": None, "since": time.monotonic()}

    def settled():
        count = len(requests_by(cluster, USER))
        if count != state["count"]:
            state.update(count=count, since=time.monotonic())
            return False
        return time.monotonic() - state["since"] >= quiet

    wait_for(settled, "certctl run to go quiet", watch=[sidecar])


def more_passes(cluster, sidecar, trigger, what):
    """Runs `trigger` (which starts a pass) and waits for that pass to finish and settle."""
    wait_quiet(cluster, sidecar)
    before = passes(sidecar)
    trigger()
    wait_for(lambda: passes(sidecar) > before, f"a pass after {what}", watch=[sidecar])
    wait_quiet(cluster, sidecar)


def events(cluster, namespace, reason):
    items = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
    return [e for e in items["items"] if e.get("reason") == reason]


@pytest.mark.backends("real")
def test_run_is_not_callable_until_the_target_calls_the_named_service(cluster, sidecars):
    cluster.kubectl("create", "namespace", NS)
    apply(cluster, vwc("hook-a", ["check.example.com"], service="hook-a"))
    sidecar = sidecars("hook-a", service="hook-b")
    finding = ("validatingwebhookconfiguration/hook-a: webhooks[0] (check.example.com) calls "
               f"hook-a.demo.svc, which the certificate does not name (it names {NAMES_B})")

    def judged():
        return (sidecar.get("/readyz?exclude=callable")[0] == 200
                and sidecar.readyz()[1].startswith("not ready: callable: "))

    wait_for(judged, "the certificate check to pass and callable to fail", watch=[sidecar])
    status, body = sidecar.readyz()
    assert status == 503 and body.startswith("not ready: callable: "
                                             "validatingwebhookconfiguration/hook-a"), body
    assert body == f"not ready: callable: {finding}\n"
    status, verbose = sidecar.get("/readyz?verbose")[:2]
    assert status == 503, verbose
    assert "[+]certificate ok" in verbose.splitlines(), verbose
    assert f"[-]callable failed: {finding}" in verbose.splitlines(), verbose
    assert os.path.exists(sidecar.ready_file)  # the certificate is there, only the name fails
    assert metric(sidecar, "certctl_target_call_findings",
                  code="target-name-not-covered") == 1
    assert metric(sidecar, "certctl_target_call_findings", code="target-invalid") == 0
    assert metric(sidecar, "certctl_ready") == 0

    warned = wait_for(lambda: events(cluster, NS, "TargetNameNotCovered"),
                      "the TargetNameNotCovered Event", watch=[sidecar], poll=0.1)
    # More passes, by signal and by a change to the target: still the one Event.
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "SIGHUP")
    more_passes(cluster, sidecar, lambda: cluster.kubectl(
        "label", "validatingwebhookconfiguration", "hook-a", "touched=1"), "a label change")
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "another SIGHUP")
    warned = events(cluster, NS, "TargetNameNotCovered")
    assert len(warned) == 1, warned
    event = warned[0]
    assert event["type"] == "Warning"
    assert event["message"] == finding
    assert event.get("count", 1) == 1, event
    involved = event["involvedObject"]
    assert (involved["kind"], involved["name"], involved["namespace"]) == ("Secret", SECRET, NS)
    assert sidecar.readyz()[0] == 503

    # The target pointed at the Service the certificate names: ready with the next pass.
    cluster.kubectl("patch", "validatingwebhookconfiguration", "hook-a", "--type", "json", "-p",
                    json.dumps([{"op": "replace",
                                 "path": "/webhooks/0/clientConfig/service/name",
                                 "value": "hook-b"}]))
    wait_for(lambda: sidecar.readyz() == (200, "ok\n"), "/readyz 200 after the fix", bound=5,
             watch=[sidecar])
    assert metric(sidecar, "certctl_target_call_findings",
                  code="target-name-not-covered") == 0
    assert metric(sidecar, "certctl_ready") == 1

    # The finding back again is told again.
    cluster.kubectl("patch", "validatingwebhookconfiguration", "hook-a", "--type", "json", "-p",
                    json.dumps([{"op": "replace",
                                 "path": "/webhooks/0/clientConfig/service/name",
                                 "value": "hook-a"}]))
    wait_for(lambda: sidecar.readyz()[0] == 503, "/readyz 503 with the finding back", bound=5,
             watch=[sidecar])
    wait_for(lambda: len(events(cluster, NS, "TargetNameNotCovered")) == 2,
             "a second TargetNameNotCovered Event", bound=5, watch=[sidecar], poll=0.1)


@pytest.mark.backends("real")
def test_run_fails_closed_once_the_webhook_serves_and_never_reopens(cluster, sidecars,
                                                                    tmp_path):
    cluster.kubectl("create", "namespace", NS)
    apply(cluster, vwc("hook", ["a.example.com", "b.example.com"],
                       policies=["Ignore", "Ignore"]))
    callable_service(cluster)
    port, = free_ports(1)  # nothing listens there yet
    sidecar = sidecars("hook", "--serving-addr", f"127.0.0.1:{port}",
                       "--failure-policy-once-ready", "Fail")

    wait_for(lambda: sidecar.get("/readyz?exclude=serving")[0] == 200,
             "the certificate and callable checks to pass", watch=[sidecar])
    # The serving check's first verdict on this certificate follows it by one handshake.
    status, body = wait_for(sidecar.serving_verdict, "the first handshake's verdict",
                            watch=[sidecar])
    assert status == 503 and body.startswith("not ready: serving: cannot connect to "), body
    # Ready but for serving, over more than one pass: still Ignore, nothing but the bundle
    # written to the configuration.
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "SIGHUP")
    assert sidecar.readyz()[0] == 503
    assert policies(cluster) == ["Ignore", "Ignore"]
    assert events(cluster, "default", "FailurePolicySet") == []

    cluster.reset_request_log()
    webhook = WebhookServer(sidecar.cert_dir, str(tmp_path), listen=f"127.0.0.1:{port}",
                            ready_timeout=BOUND)
    started = time.monotonic()
    webhook.start(bound=BOUND)
    try:
        wait_for(lambda: policies(cluster) == ["Fail", "Fail"], "failurePolicy Fail",
                 bound=10, watch=[sidecar, webhook], poll=0.1)
        took = time.monotonic() - started
        print(f"failurePolicy Fail {took:.3f}s after the webhook server was started")
        assert took < 7, took  # a failing serving check is re-tried every 5 s
        assert sidecar.readyz() == (200, "ok\n")
        assert [w[:4] for w in writes_by(cluster, USER)
                if w[2] == "validatingwebhookconfigurations"] == [
            ("patch", "PATCH", "validatingwebhookconfigurations", "hook")]
        set_events = wait_for(lambda: events(cluster, "default", "FailurePolicySet"),
                              "the FailurePolicySet Event", bound=5, watch=[sidecar], poll=0.1)
        event = set_events[0]
        assert event["type"] == "Normal"
        assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == (VWC, "hook")

        # More passes (signals, a change to another watched object): nothing more written.
        cluster.reset_request_log()
        more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "SIGHUP")
        more_passes(cluster, sidecar, lambda: cluster.kubectl(
            "label", "secret", SECRET, "-n", NS, "touched=1"), "a label on the Secret")
        more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "another SIGHUP")
        assert [w for w in writes_by(cluster, USER)
                if w[2] == "validatingwebhookconfigurations"] == []
        assert len(events(cluster, "default", "FailurePolicySet")) == 1
    finally:
        assert webhook.stop() == 0

    # Readiness lost: the policy stays Fail.
    wait_for(lambda: sidecar.readyz()[0] == 503, "/readyz 503 with the webhook gone",
             bound=10, watch=[sidecar])
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "SIGHUP while unready")
    assert policies(cluster) == ["Fail", "Fail"]
    assert [w for w in writes_by(cluster, USER)
            if w[2] == "validatingwebhookconfigurations"] == []


HOLD = "certctl.io/hold-failure-policy"


@pytest.mark.backends("real")
def test_the_hold_annotation_makes_an_operators_ignore_stick(cluster, sidecars, certctl_binary):
    """Break-glass: in an incident the operator annotates the configuration and sets Ignore;
    certctl leaves every failurePolicy in it alone and says so in /readyz?verbose, its metrics
    and `check`, until the annotation is removed."""
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user("checker", checker_rules())
    apply(cluster, vwc("hook", ["a.example.com", "b.example.com"],
                       policies=["Ignore", "Ignore"]))
    callable_service(cluster)
    sidecar = sidecars("hook", "--failure-policy-once-ready", "Fail")
    wait_for(lambda: policies(cluster) == ["Fail", "Fail"], "failurePolicy Fail",
             watch=[sidecar])

    cluster.kubectl("annotate", "validatingwebhookconfiguration", "hook", f"{HOLD}=incident-4711")
    cluster.reset_request_log()
    cluster.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                    json.dumps([{"op": "replace", "path": f"/webhooks/{i}/failurePolicy",
                                 "value": "Ignore"} for i in (0, 1)]))
    # The change starts a pass (a watched target changed), and more follow: Ignore stays.
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "SIGHUP")
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "another SIGHUP")
    assert policies(cluster) == ["Ignore", "Ignore"]
    assert [w for w in writes_by(cluster, USER)
            if w[2] == "validatingwebhookconfigurations"] == []
    status, body = sidecar.get("/readyz?verbose")[:2]
    assert status == 200, body
    assert (f"hold: validatingwebhookconfiguration/hook carries {HOLD}: certctl changes no "
            "failurePolicy in it") in body, body
    metrics, _ = sidecar.metrics()
    assert 'certctl_failure_policy_held{target="validatingwebhookconfiguration/hook"} 1' in \
        metrics, metrics
    result = check(cluster, certctl_binary)
    assert (f"validatingwebhookconfiguration/hook carries {HOLD}: certctl changes no "
            "failurePolicy in it while it does") in result.stdout + result.stderr, result

    # The incident is over: the hold comes off, and Fail comes back.
    cluster.kubectl("annotate", "validatingwebhookconfiguration", "hook", f"{HOLD}-")
    wait_for(lambda: policies(cluster) == ["Fail", "Fail"], "failurePolicy Fail again",
             bound=10, watch=[sidecar], poll=0.1)
    wait_for(lambda: 'certctl_failure_policy_held{target="validatingwebhookconfiguration/hook"} 0'
             in sidecar.metrics()[0], "the hold's gauge at 0", bound=5, watch=[sidecar])
    assert "hold:" not in sidecar.get("/readyz?verbose")[1]


@pytest.mark.backends("real")
def test_run_sets_fail_only_on_entries_the_api_server_can_call(cluster, sidecars):
    """SPEC 4a, per entry: Fail only while the Service an entry calls exists with the port it
    names and has a ready endpoint; the others keep Ignore, and the log says why. Nothing
    watches Services: certctl looks again by itself while an entry waits."""
    cluster.kubectl("create", "namespace", NS)
    configuration = vwc("hook", ["a.example.com", "b.example.com"],
                        policies=["Ignore", "Ignore"])
    configuration["webhooks"][1]["clientConfig"]["service"]["port"] = 9999
    apply(cluster, configuration)
    sidecar = sidecars("hook", "--failure-policy-once-ready", "Fail")
    wait_for(lambda: sidecar.readyz()[0] == 200, "ready", watch=[sidecar])
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "SIGHUP")
    assert policies(cluster) == ["Ignore", "Ignore"]  # no Service at all
    assert "kept failurePolicy Ignore on 2 entries the API server cannot call" in sidecar.log()
    assert f"service/{NS}/hook: does not exist" in sidecar.log()

    service, slice_ = service_with_endpoints("hook", NS, ready=(False,))
    apply(cluster, service, slice_)
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "the Service")
    assert policies(cluster) == ["Ignore", "Ignore"]  # no ready endpoint

    slice_["endpoints"][0]["conditions"]["ready"] = True
    apply(cluster, slice_)  # no signal: certctl looks again by itself
    # Its looks: 5 s after the reason changed (the Service came), then 10 s after that.
    wait_for(lambda: policies(cluster) == ["Fail", "Ignore"], "Fail on the entry on port 443",
             bound=15, watch=[sidecar], poll=0.1)
    assert "has no port 9999" in sidecar.log()
    more_passes(cluster, sidecar, lambda: sidecar.send(signal.SIGHUP), "SIGHUP")
    assert policies(cluster) == ["Fail", "Ignore"]


@pytest.mark.backends("real")
def test_run_looks_at_a_kept_entrys_service_less_often_while_nothing_changes(cluster,
                                                                               sidecars):
    """An entry that stays uncallable is judged again 5 s after it was first kept, then 10 s
    later, twice as long each time up to 2 minutes: not a read of its Service every 5 s for
    ever."""
    cluster.kubectl("create", "namespace", NS)
    apply(cluster, vwc("hook", ["a.example.com"], policies=["Ignore"]))
    sidecar = sidecars("hook", "--failure-policy-once-ready", "Fail")
    wait_for(lambda: sidecar.readyz()[0] == 200, "ready", watch=[sidecar])
    wait_quiet(cluster, sidecar)  # the passes that followed its own first writes
    cluster.reset_request_log()

    def service_reads():
        return [datetime.datetime.fromisoformat(e["time"].rstrip("Z"))
                for e in requests_by(cluster, USER) if e["resource"] == "services"]

    wait_for(lambda: len(service_reads()) >= 2, "two more looks at the missing Service",
             bound=45, watch=[sidecar], poll=0.2)
    first, second = service_reads()[:2]
    gap = (second - first).total_seconds()
    assert gap >= 8, f"{gap:.1f} s between two looks; a fixed 5 s poll would give 5"
    assert policies(cluster) == ["Ignore"]
    assert "kept failurePolicy Ignore on 1 entry the API server cannot call" in sidecar.log()


@pytest.mark.backends("real")
def test_job_sets_fail_only_on_callable_entries_and_names_the_rest(job_user, certctl_binary):
    configuration = vwc("hook", ["a.example.com", "b.example.com"], policies=["Ignore", "Ignore"])
    configuration["webhooks"][1]["clientConfig"]["service"]["port"] = 9999
    apply(job_user, configuration)
    result = job(job_user, certctl_binary, "--failure-policy-once-ready", "Fail")
    assert result.returncode == 1, result.stderr  # no Service at all
    assert "kept failurePolicy Ignore on 2 webhook entries the API server cannot call" in \
        last_line(result), result.stderr
    assert policies(job_user) == ["Ignore", "Ignore"]

    callable_service(job_user)
    result = job(job_user, certctl_binary, "--failure-policy-once-ready", "Fail")
    assert result.returncode == 1, result.stderr
    assert "has no port 9999" in last_line(result), result.stderr
    assert policies(job_user) == ["Fail", "Ignore"]

    # Again: nothing left to change, and the log does not claim every entry is Fail.
    result = job(job_user, certctl_binary, "--failure-policy-once-ready", "Fail")
    assert result.returncode == 1, result.stderr
    assert "no webhook entry changed to failurePolicy Fail" in result.stderr, result.stderr
    assert "every webhook entry already has failurePolicy Fail" not in result.stderr
    assert "kept failurePolicy Ignore on 1 webhook entry" in last_line(result), result.stderr
    assert policies(job_user) == ["Fail", "Ignore"]
