"""`certctl controller` on the real API server: a Service annotated
certctl.io/serving-cert-secret gets a managed Secret, a webhook configuration annotated
certctl.io/inject-ca-from gets its CA, and then nothing is written while nothing changes; a
wiped caBundle is repaired at once; what an annotation asks that cannot be done is a Warning
Event on the object that asked, with nothing written; Secrets no annotation names are never
read."""
import base64
import json
import signal
import threading

import pytest
from cryptography import x509

from harness.api_server import RealAdmissionProbe, bundle_fingerprints, served_serials
from harness.badpki import Authority
from harness.certctl import (run_certctl, selectorless_service, service_with_endpoints,
                             webhook_configuration)
from harness.fleet import CONTROLLER_RULES, ClusterController
from harness.rbac import controller_rules, request_name
from harness.sidecar import WebhookServer, free_ports, stop_all
from harness.waiting import wait_for

NS = "team-a"
USER = "system:serviceaccount:certctl-system:certctl-controller"
VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def apply(cluster, *objects):
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": list(objects)}))


def annotated_service(name, secret, namespace=NS):
    service, slice_ = service_with_endpoints(name, namespace)
    service["metadata"]["annotations"] = {"certctl.io/serving-cert-secret": secret}
    return service, slice_


def annotated_configuration(name, source, service="hook"):
    configuration = webhook_configuration("ValidatingWebhookConfiguration", name,
                                          [f"{name}.example.com"], service=service,
                                          namespace=NS)
    configuration["metadata"]["annotations"] = {"certctl.io/inject-ca-from": source}
    return configuration


BYSTANDER = {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "bystander", "namespace": NS},
             "stringData": {"password": "nobody asked"}}


def apply_hook(cluster, *more):
    """The Service `hook` asking for hook-tls, the configuration `policy` injecting from it."""
    apply(cluster, *annotated_service("hook", "hook-tls"),
          annotated_configuration("policy", f"{NS}/hook-tls"), *more)


def secret(cluster, name, namespace=NS):
    result = cluster.kubectl("get", "secret", "-n", namespace, name, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def ca_bundle(cluster, name):
    webhooks = cluster.api("GET", f"{VWC_PATH}/{name}").json()["webhooks"]
    return base64.b64decode(webhooks[0]["clientConfig"].get("caBundle", "")).decode()


def events(cluster, reason, namespace="default"):
    items = cluster.api("GET", f"/api/v1/namespaces/{namespace}/events").json()["items"]
    return [e for e in items if e["reason"] == reason]


def reconciles(process):
    return process.metric("certctl_controller_reconcile_total") or 0


def controller_requests(cluster):
    name = USER.rsplit(":", 1)[1]
    return [r for r in cluster.request_log()["requests"] if r["user"].endswith(name)]


@pytest.fixture
def controller(cluster, certctl_binary, tmp_path):
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user(USER, CONTROLLER_RULES)
    started = []

    def start(*args):
        process = ClusterController(certctl_binary, cluster, str(tmp_path),
                                    f"controller-{len(started)}", USER, list(args)).start()
        started.append(process)
        wait_for(lambda: process.readyz()[0] == 200, "the controller's watches listed",
                 watch=[process])
        return process

    yield start
    stop_all(started)
    # Every request the controller made was granted by the chart's table (CONTROLLER_RULES).
    refused = [(r["verb"], r["resource"], r["name"]) for r in controller_requests(cluster)
               if r["code"] == 403]
    assert refused == [], refused


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_an_annotated_service_and_configuration_are_served_then_left_alone(cluster, controller,
                                                                         certctl_binary):
    apply_hook(cluster, BYSTANDER)
    cluster.reset_request_log()
    process = controller()
    wait_for(lambda: secret(cluster, "hook-tls") and ca_bundle(cluster, "policy") ==
             base64.b64decode(secret(cluster, "hook-tls")["data"]["ca.crt"]).decode(),
             "the Secret issued and its CA injected", watch=[process])

    stored = secret(cluster, "hook-tls")
    assert stored["type"] == "kubernetes.io/tls"
    assert stored["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "certctl"
    assert stored["metadata"]["labels"]["certctl.io/serving-cert-for"] == "hook"
    assert stored["metadata"]["annotations"]["certctl.io/issued-by"].startswith(
        "certctl controller ")
    leaf = x509.load_pem_x509_certificate(base64.b64decode(stored["data"]["tls.crt"]))
    names = leaf.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert names[0] == "hook.team-a.svc", names

    # `certctl audit` tells which objects ask the controller for their CA, and from where.
    audited = run_certctl(certctl_binary, "audit", "--kubeconfig", cluster.kubeconfig(),
                          "--log-level", "off", "-o", "json")
    (entry,) = [o for o in json.loads(audited.stdout)["objects"] if o["name"] == "policy"]
    assert entry["injectedFrom"] == {"annotation": "certctl.io/inject-ca-from",
                                     "secret": f"{NS}/hook-tls"}, entry
    assert not entry["findings"], entry

    # A change elsewhere in the configuration is reconciled, and writes nothing.
    cluster.reset_request_log()
    before = reconciles(process)
    cluster.kubectl("label", "validatingwebhookconfiguration", "policy", "touched=yes")
    wait_for(lambda: reconciles(process) > before, "a reconcile after the label", watch=[process])
    writes = [r for r in cluster.writes() if r["user"].endswith("certctl-controller")
              and r["resource"] != "events"]
    assert writes == [], writes


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_a_secret_no_annotation_names_is_never_read(cluster, controller):
    apply_hook(cluster, BYSTANDER)
    cluster.reset_request_log()
    process = controller()
    wait_for(lambda: ca_bundle(cluster, "policy"), "the CA injected", watch=[process])
    seen = set()
    for request in controller_requests(cluster):
        if request["resource"] != "secrets":
            continue
        seen.add(request["verb"])
        # By name (a list or watch pinned by metadata.name counts as one for that name, as the
        # API server authorizes it), or by the label of the Secrets the controller issued.
        assert request_name(request) in ("", "hook-tls"), request
        if request_name(request) == "" and request["verb"] != "create":
            assert "labelSelector=certctl.io%2Fserving-cert-for" in request["query"], request
    assert {"list", "watch", "get", "create"} <= seen, seen


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_a_wiped_ca_bundle_is_repaired_at_once(cluster, controller):
    apply_hook(cluster)
    process = controller()
    wait_for(lambda: ca_bundle(cluster, "policy"), "the CA injected", watch=[process])
    injected = ca_bundle(cluster, "policy")
    patch = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle",
              "value": base64.b64encode(b"wiped").decode()}]
    resp = cluster.api("PATCH", f"{VWC_PATH}/policy?fieldManager=helm", patch,
                       content_type="application/json-patch+json")
    assert resp.status == 200, resp.body
    wait_for(lambda: ca_bundle(cluster, "policy") == injected, "the caBundle repaired", bound=5,
             poll=0.02, watch=[process])


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_what_cannot_be_honoured_is_told_on_the_object_and_nothing_is_written(cluster,
                                                                             controller):
    theirs = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": {"name": "theirs", "namespace": NS},
              "data": {"tls.crt": base64.b64encode(b"not a certificate").decode(),
                       "tls.key": base64.b64encode(b"not a key").decode()}}
    apply(cluster, theirs, *annotated_service("owned", "theirs"),
          annotated_configuration("missing", f"{NS}/absent"),
          annotated_configuration("malformed", "no-slash-here"))
    before = secret(cluster, "theirs")
    process = controller()
    wait_for(lambda: events(cluster, "InjectionSourceMissing"), "InjectionSourceMissing",
             watch=[process])
    missing = events(cluster, "InjectionSourceMissing")[0]
    assert missing["type"] == "Warning"
    assert missing["involvedObject"]["name"] == "missing"
    assert missing["involvedObject"]["uid"]
    assert "secret/team-a/absent, which does not exist" in missing["message"]

    wait_for(lambda: events(cluster, "AnnotationInvalid"), "AnnotationInvalid", watch=[process])
    malformed = events(cluster, "AnnotationInvalid")[0]
    assert malformed["involvedObject"]["name"] == "malformed"
    assert "not NAMESPACE/SECRET" in malformed["message"]

    wait_for(lambda: events(cluster, "SecretNotManaged", NS), "SecretNotManaged",
             watch=[process])
    not_managed = events(cluster, "SecretNotManaged", NS)[0]
    assert not_managed["involvedObject"]["kind"] == "Service"
    assert not_managed["involvedObject"]["name"] == "owned"

    assert secret(cluster, "absent") is None
    after = secret(cluster, "theirs")
    assert after["data"] == before["data"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert ca_bundle(cluster, "missing") == "" and ca_bundle(cluster, "malformed") == ""
    assert process.readyz()[0] == 200  # the controller stays ready


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_a_name_the_certificate_lacks_is_a_warning_on_the_target_and_the_controller_stays_ready(
        cluster, controller):
    apply(cluster, *annotated_service("hook", "hook-tls"), *service_with_endpoints("other", NS),
          annotated_configuration("elsewhere", f"{NS}/hook-tls", service="other"))
    process = controller()
    wait_for(lambda: events(cluster, "TargetNameNotCovered"), "TargetNameNotCovered",
             watch=[process])
    event = events(cluster, "TargetNameNotCovered")[0]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "elsewhere"
    assert event["involvedObject"]["uid"]
    assert "other.team-a.svc" in event["message"]
    labels = {"target": "validatingwebhookconfiguration/elsewhere",
              "code": "target-name-not-covered"}
    assert process.metric("certctl_controller_target_call_findings", labels) == 1
    assert process.readyz()[0] == 200


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_a_fighting_writer_on_one_target_is_damped_without_slowing_the_others(cluster,
                                                                              controller):
    apply(cluster, *annotated_service("hook", "hook-tls"),
          annotated_configuration("fought", f"{NS}/hook-tls"),
          annotated_configuration("calm", f"{NS}/hook-tls"))
    process = controller()
    wait_for(lambda: ca_bundle(cluster, "fought") and ca_bundle(cluster, "calm"),
             "both injected", watch=[process])
    injected = ca_bundle(cluster, "calm")
    foreign = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle",
                "value": base64.b64encode(b"foreign").decode()}]

    def reset(name, manager):
        resp = cluster.api("PATCH", f"{VWC_PATH}/{name}?fieldManager={manager}", foreign,
                           content_type="application/json-patch+json")
        assert resp.status == 200, resp.body

    cluster.reset_request_log()
    stop = threading.Event()

    def fight():
        while not stop.is_set():
            reset("fought", "fighter")
            stop.wait(0.1)

    fighter = threading.Thread(target=fight, daemon=True)
    fighter.start()
    try:
        wait_for(lambda: events(cluster, "CABundleOverwritten"), "the fight told",
                 watch=[process])
        # The other configuration, wiped once meanwhile, is repaired at once.
        reset("calm", "helm")
        wait_for(lambda: ca_bundle(cluster, "calm") == injected, "the calm one repaired",
                 bound=5, poll=0.02, watch=[process])
        stop.wait(15)
    finally:
        stop.set()
        fighter.join()
    repairs = [r for r in cluster.writes() if r["user"].endswith("certctl-controller")
               and r["name"] == "fought"]
    assert 3 <= len(repairs) <= 12, len(repairs)
    told = events(cluster, "CABundleOverwritten")
    assert len(told) == 1, told
    assert 'field manager "fighter"' in told[0]["message"]
    assert told[0]["involvedObject"]["name"] == "fought"


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_fail_once_callable_sets_fail_only_where_the_api_server_can_call(cluster, controller):
    def failing_closed(name, port):
        configuration = annotated_configuration(name, f"{NS}/hook-tls")
        configuration["metadata"]["annotations"]["certctl.io/failure-policy-once-ready"] = "Fail"
        configuration["webhooks"][0]["failurePolicy"] = "Ignore"
        configuration["webhooks"][0]["clientConfig"]["service"]["port"] = port
        return configuration

    # The Service has port 443 alone: an entry calling 8443 cannot be called.
    apply(cluster, *annotated_service("hook", "hook-tls"),
          failing_closed("callable", 443), failing_closed("uncallable", 8443))
    process = controller()

    def policy(name):
        return cluster.api("GET", f"{VWC_PATH}/{name}").json()["webhooks"][0]["failurePolicy"]

    wait_for(lambda: policy("callable") == "Fail", "Fail where the API server can call",
             watch=[process])
    wait_for(lambda: events(cluster, "FailurePolicySet"), "FailurePolicySet", watch=[process])
    assert [e["involvedObject"]["name"] for e in events(cluster, "FailurePolicySet")] == \
        ["callable"]
    wait_for(lambda: "kept failurePolicy Ignore on 1 entry" in process.log(),
             "the uncallable entry kept at Ignore, and said why", watch=[process])
    assert policy("uncallable") == "Ignore"
    assert "8443" in process.log()


def apply_two_teams(cluster):
    """team-a's Service and configuration, and team-b's, in a namespace of its own."""
    cluster.kubectl("create", "namespace", "team-b")
    apply(cluster, *annotated_service("hook", "hook-tls"),
          annotated_configuration("policy", f"{NS}/hook-tls"),
          *annotated_service("other", "other-tls", namespace="team-b"),
          annotated_configuration("elsewhere", "team-b/other-tls", service="other"))


def assert_team_b_told(cluster, process, why):
    """team-a served; team-b left alone, and its configuration told `why` in one Event."""
    wait_for(lambda: ca_bundle(cluster, "policy"), "team-a's CA injected", watch=[process])
    wait_for(lambda: events(cluster, "AnnotationInvalid"), "AnnotationInvalid", watch=[process])
    (told,) = events(cluster, "AnnotationInvalid")
    assert told["involvedObject"]["name"] == "elsewhere", told
    assert why in told["message"], told
    assert secret(cluster, "other-tls", "team-b") is None
    assert ca_bundle(cluster, "elsewhere") == ""


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_a_namespace_selector_acts_only_where_it_selects_and_follows_the_labels(cluster,
                                                                               controller):
    """--namespace-selector: a Service in a namespace it does not select gets nothing, a target
    naming a Secret there is told so; labelled, the namespace joins without a restart."""
    selector = "certctl.io/webhooks=on"
    cluster.add_user(USER, controller_rules("certctl-system", namespace_selector=selector))
    cluster.kubectl("label", "namespace", NS, selector)
    apply_two_teams(cluster)
    process = controller("--namespace-selector", selector)
    assert_team_b_told(cluster, process,
                       f"team-b, a namespace that --namespace-selector {selector} does not select")

    cluster.kubectl("label", "namespace", "team-b", selector)
    wait_for(lambda: secret(cluster, "other-tls", "team-b") and ca_bundle(cluster, "elsewhere"),
             "team-b's Secret issued and injected once selected", watch=[process])
    assert process.readyz()[0] == 200


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_a_target_naming_a_secret_outside_the_watched_namespaces_is_told(cluster, controller):
    cluster.add_user(USER, controller_rules("certctl-system", watched=[NS]))
    apply_two_teams(cluster)
    process = controller("--namespace", NS)
    assert_team_b_told(cluster, process,
                       "team-b, a namespace this controller does not watch (--namespace team-a)")
    assert process.readyz()[0] == 200


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_with_leader_election_one_replica_writes_and_another_takes_over(cluster, controller):
    """As the chart runs it: two replicas, one Lease. Both watch and are ready; the leader
    alone writes; killed, it is replaced within the lease duration, and the new leader
    repairs what changed meanwhile."""
    apply_hook(cluster)
    lease = ("--leader-elect", "--lease-duration", "4s", "--lease-renew-deadline", "3s",
             "--lease-retry-period", "1s")
    first = controller(*lease)
    wait_for(lambda: first.metric("certctl_leader") == 1, "the first replica leading",
             watch=[first])
    second = controller(*lease)
    wait_for(lambda: ca_bundle(cluster, "policy"), "the CA injected", watch=[first, second])
    injected = ca_bundle(cluster, "policy")
    assert second.metric("certctl_leader") == 0 and second.readyz()[0] == 200
    assert not second.metric("certctl_controller_writes_total")

    first.stop(signal.SIGKILL)  # no release: the Lease must expire
    cluster.api("PATCH", f"{VWC_PATH}/policy", [
        {"op": "replace", "path": "/webhooks/0/clientConfig/caBundle",
         "value": base64.b64encode(b"wiped").decode()}],
        content_type="application/json-patch+json")
    wait_for(lambda: ca_bundle(cluster, "policy") == injected,
             "the caBundle repaired by the new leader", bound=20, watch=[second])
    assert second.metric("certctl_leader") == 1
    assert second.metric("certctl_controller_writes_total") >= 1


def generated_ca(certctl_binary):
    made = run_certctl(certctl_binary, "generate", "--service", "theirs", "-n", NS,
                       "-o", "secret-json", "--log-level", "off")
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout)["data"]["ca.crt"]


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_a_change_of_a_secret_only_injected_from_reaches_its_targets_at_once(cluster, controller,
                                                                           certctl_binary):
    """A Secret another tool keeps (cert-manager renewing a self-signed certificate changes
    its ca.crt) is watched by its name alone: its new CA is injected within seconds, not at
    the resync, and no other Secret is read."""
    theirs = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "theirs", "namespace": NS},
              "data": {"ca.crt": generated_ca(certctl_binary)}}
    apply(cluster, theirs, BYSTANDER, annotated_configuration("policy", f"{NS}/theirs"))
    cluster.reset_request_log()
    process = controller()
    first = base64.b64decode(theirs["data"]["ca.crt"]).decode()
    wait_for(lambda: ca_bundle(cluster, "policy") == first, "the CA injected", watch=[process])

    theirs["data"]["ca.crt"] = generated_ca(certctl_binary)
    apply(cluster, theirs)
    renewed = base64.b64decode(theirs["data"]["ca.crt"]).decode()
    wait_for(lambda: ca_bundle(cluster, "policy") == renewed, "the renewed CA injected",
             bound=10, watch=[process])
    secret_reads = [r for r in controller_requests(cluster) if r["resource"] == "secrets"]
    assert {request_name(r) for r in secret_reads} == {"", "theirs"}, secret_reads
    assert all("labelSelector=certctl.io%2Fserving-cert-for" in r["query"]
               for r in secret_reads if request_name(r) == ""), secret_reads
    assert [r for r in cluster.writes() if r["resource"] == "secrets"
            and r["user"].endswith("certctl-controller")] == []


def cainjector_state(name, kind, secret):
    """A configuration as cert-manager's cainjector leaves it: annotated
    cert-manager.io/inject-ca-from-secret, failurePolicy Fail on ConfigMap creates in NS, and
    (applied by apply_as_cainjector) the Secret's CA in its caBundle."""
    configuration = webhook_configuration(kind, name, [f"{name}.example.com"], service="hook",
                                          namespace=NS)
    configuration["metadata"]["annotations"] = {
        "cert-manager.io/inject-ca-from-secret": f"{NS}/{secret}"}
    for webhook in configuration["webhooks"]:
        webhook.update(failurePolicy="Fail", sideEffects="None",
                       namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": NS}},
                       rules=[{"operations": ["CREATE"], "apiGroups": [""],
                               "apiVersions": ["v1"], "resources": ["configmaps"]}])
        webhook["clientConfig"]["service"].update(path="/validate", port=443)
        webhook["clientConfig"].pop("caBundle", None)
    return configuration


def apply_as_cainjector(cluster, path, configuration, ca_pem):
    """cainjector's write: a server-side apply of the caBundles alone, field manager
    `cainjector`."""
    patch = {"apiVersion": configuration["apiVersion"], "kind": configuration["kind"],
             "metadata": {"name": configuration["metadata"]["name"]},
             "webhooks": [{"name": w["name"], "clientConfig": {
                 "caBundle": base64.b64encode(ca_pem.encode()).decode()}}
                 for w in configuration["webhooks"]]}
    resp = cluster.api("PATCH", f"{path}?fieldManager=cainjector&force=true", patch,
                       content_type="application/apply-patch+yaml")
    assert resp.status == 200, resp.body


@pytest.mark.backends("real")
@pytest.mark.time_limit(60)
def test_taking_over_from_cainjector_changes_no_bundle_and_fails_no_call(cluster, controller,
                                                                         tmp_path):
    """docs/controller.md's move from cainjector: configurations cainjector filled (its
    annotation, its bundle, its field manager) keep working while `certctl controller
    --cert-manager-annotations` starts beside them: it finds every bundle right, writes
    nothing, and the API server's calls through both configurations never fail."""
    ca = Authority("cert-manager-ca")
    leaf = ca.issue([f"hook.{NS}.svc"])
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "tls.crt").write_text(leaf.cert_pem)
    (certs / "tls.key").write_text(leaf.key_pem)
    port, = free_ports(1)
    server = WebhookServer(str(certs), str(tmp_path), name="webhook",
                           listen=f"{cluster.node_ip}:{port}")
    source = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": {"name": "cm-tls", "namespace": NS, "annotations": {
                  "cert-manager.io/allow-direct-injection": "true"}},
              "stringData": {"ca.crt": ca.cert_pem, "tls.crt": leaf.cert_pem,
                             "tls.key": leaf.key_pem}}
    configurations = {
        VWC_PATH + "/policy": cainjector_state("policy", "ValidatingWebhookConfiguration",
                                               "cm-tls"),
        MWC_PATH + "/defaults": cainjector_state("defaults", "MutatingWebhookConfiguration",
                                                 "cm-tls")}
    apply(cluster, source, *selectorless_service("hook", NS, cluster.node_ip, port))
    with server:
        apply(cluster, *configurations.values())
        for path, configuration in configurations.items():
            apply_as_cainjector(cluster, path, configuration, ca.cert_pem)
        before = {path: cluster.api("GET", path).json()["metadata"]["resourceVersion"]
                  for path in configurations}
        served = lambda: served_serials(server.log())  # noqa: E731
        with RealAdmissionProbe(cluster, list(configurations), served, NS) as probe:
            probe.wait_rounds(10)
            assert probe.failures == [], probe.report()  # cainjector's state works as it is
            cluster.reset_request_log()
            process = controller("--cert-manager-annotations")
            wait_for(lambda: reconciles(process) >= 1, "the Secret reconciled", watch=[process])
            probe.wait_rounds(10)
        assert probe.failures == [] and probe.calls >= 20, probe.report()
    assert probe.bundles_seen == [bundle_fingerprints(ca.cert_pem)], probe.report()
    after = {path: cluster.api("GET", path).json()["metadata"]["resourceVersion"]
             for path in configurations}
    assert after == before
    writes = [r for r in cluster.writes() if r["user"].endswith("certctl-controller")
              and r["resource"] != "events"]
    assert writes == [], writes
    assert process.metric("certctl_controller_problems_total") is None, process.log()
