"""The soak's books on a real API server (e2e/soak/apiserver.py, ledger.py): kube-apiserver's
answers turned into calls with a cause, counted against the events under way, and its own
metrics read back. A fake cluster answers as kube-apiserver v1.37 does (its words are the
ones the real-backend tests meet)."""

import base64
import json

from soak.apiserver import KubeApiServerCaller, classify_answer
from soak.ledger import Event, Ledger

POST = 'failed to call webhook: Post "https://hook.infra.svc:443/validate?timeout=10s": '
BUNDLE = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


class Answer:
    def __init__(self, status, body):
        self.status, self.body = status, body.encode()

    def json(self):
        return json.loads(self.body)


class FakeApiServer:
    def __init__(self, answers, metrics=""):
        self.answers, self.metrics, self.posts = list(answers), metrics, []

    def api(self, method, path, body=None, timeout=None):
        if method == "GET":
            return Answer(200, self.metrics)
        self.posts.append((path, body))
        return self.answers.pop(0)


class FakeInformer:
    def __init__(self, path, items):
        self.path, self._items = path, items

    def items(self):
        return self._items


def configuration(kind, name, webhook, bundle=BUNDLE):
    return {"kind": kind, "metadata": {"name": name},
            "webhooks": [{"name": webhook, "clientConfig": {
                "service": {"namespace": "infra", "name": "hook"},
                "caBundle": base64.b64encode(bundle.encode()).decode() if bundle else ""}}]}


def refused(webhook, words):
    message = f'Internal error occurred: failed calling webhook "{webhook}": {POST}{words}'
    return Answer(500, json.dumps({"kind": "Status", "message": message}))


def caller(answers, bundle=BUNDLE, metrics=""):
    informers = [
        FakeInformer("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                     [configuration("ValidatingWebhookConfiguration", "hook", "v.example.com",
                                    bundle)]),
        FakeInformer("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                     [configuration("MutatingWebhookConfiguration", "hook-m", "m.example.com",
                                    bundle)])]
    failures, successes = [], []
    api = FakeApiServer(answers, metrics)
    return (KubeApiServerCaller(api, informers, "infra", failures.append, successes.append),
            api, failures, successes)


def test_each_cause_is_read_from_the_api_servers_words():
    said = {
        "tls: failed to verify certificate: x509: certificate signed by unknown authority":
            "unknown-authority",
        "tls: failed to verify certificate: x509: certificate is valid for hook-b.infra.svc, "
        "not hook-a.infra.svc": "name-mismatch",
        "tls: failed to verify certificate: x509: certificate has expired or is not yet "
        "valid: current time 2026-11-28T00:00:00Z is after 2026-11-27T23:59:00Z": "expired",
        'service "hook" not found': "no-endpoints",
        'no endpoints available for service "hook-v2"': "no-endpoints",
        "dial tcp 192.0.2.2:14211: connect: connection refused": "refused",
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)":
            "timeout",
        "EOF": "bad-answer",
    }
    for words, cause in said.items():
        assert classify_answer(words) == cause, words


def test_an_admitted_create_is_one_call_of_every_entry():
    call, api, failures, successes = caller([Answer(201, "{}")])
    call.step()
    assert sorted(successes) == ["mutating/hook-m[0]", "validating/hook[0]"]
    assert failures == []
    path, body = api.posts[0]
    assert path == "/api/v1/namespaces/infra/configmaps?dryRun=All"
    assert body["kind"] == "ConfigMap"


def test_a_failed_validating_call_follows_an_admitting_mutating_one():
    call, _, failures, successes = caller([refused(
        "v.example.com", "tls: failed to verify certificate: x509: certificate signed by "
                         "unknown authority")])
    call.step()
    assert successes == ["mutating/hook-m[0]"]
    [failed] = failures
    assert (failed.target, failed.host, failed.cause) == (
        "validating/hook[0]", "hook.infra.svc", "unknown-authority")
    assert failed.at <= failed.until
    assert call.failed == {"v.example.com": 1}


def test_a_failed_mutating_call_stops_the_request_and_no_bundle_is_named():
    call, _, failures, successes = caller([refused(
        "m.example.com", "tls: failed to verify certificate: x509: certificate signed by "
                         "unknown authority")], bundle="")
    call.step()
    assert successes == []
    assert [(f.target, f.cause) for f in failures] == [("mutating/hook-m[0]", "no-bundle")]


def test_an_answer_that_names_no_webhook_is_the_api_servers_own_failure():
    call, _, failures, _ = caller([Answer(503, json.dumps({"message": "etcdserver: timeout"}))])
    call.step()
    assert [(f.cause, f.detail) for f in failures] == [("api-server", "503: etcdserver: timeout")]
    assert not call.failed


def test_the_api_servers_metrics_are_read_per_webhook():
    metrics = "\n".join([
        "# TYPE apiserver_admission_webhook_request_total counter",
        'apiserver_admission_webhook_request_total{code="200",name="v.example.com",'
        'operation="CREATE",rejected="false",type="validating"} 40',
        'apiserver_admission_webhook_request_total{code="0",name="v.example.com",'
        'operation="CREATE",rejected="true",type="validating"} 2',
        'apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",'
        'name="v.example.com",operation="CREATE",rejection_code="0",type="validating"} 2',
        'apiserver_admission_webhook_rejection_count{error_type="no_error",'
        'name="v.example.com",operation="CREATE",rejection_code="400",type="validating"} 5',
        'apiserver_admission_webhook_request_total{code="200",name="m.example.com",'
        'operation="CREATE",rejected="false",type="admit"} 42'])
    call, _, _, _ = caller([], metrics=metrics)
    assert call.metrics() == {"v.example.com": (42, 2), "m.example.com": (42, 0)}


def test_a_call_answered_after_an_event_began_counts_against_it():
    """kube-apiserver calls the webhook some time while the soak's request is on its way:
    a call sent just before the event began and answered after it is the event's."""
    ledger = Ledger(clock=lambda: 10.0)
    event = ledger.begin(Event("fight", "another writer", {"unknown-authority": "the fight"}))
    call, _, failures, _ = caller([refused(
        "v.example.com", "x509: certificate signed by unknown authority")])
    call.step()
    [failed] = failures
    failed.at, failed.until = 9.9, 10.1
    ledger.failure(failed)
    assert ledger.undeclared() == []
    assert event.failures == [(failed, True)]
    failed_before = type(failed)(9.0, "validating/hook[0]", "hook.infra.svc", None,
                                 "unknown-authority", "", until=9.5)
    ledger.failure(failed_before)
    assert [names for _, names in ledger.undeclared()] == [[]]
