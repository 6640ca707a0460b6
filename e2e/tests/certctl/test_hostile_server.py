"""certctl against a hostile API server: answers no honest kube-apiserver sends.

certctl runs as a Helm hook that may write a Secret holding a CA key and the caBundles
that decide which webhook servers the API server trusts; what the API server (or whatever
answers in its place: a proxy, a compromised endpoint, a kubeconfig pointing at the wrong
host) sends back is input it must not trust blindly. Each case scripts one hostile answer
with harness/hostile.py and pins what certctl does with it: bounded memory and requests,
no retries of permanent failures, no writes based on answers it cannot trust, and error
messages that are one readable line however the server words them.

`certctl job` runs with --wait-for-targets 3s --request-timeout 5s, so the cases that retry
end within seconds; `certctl check` runs in cluster mode (the Secret webhook-server-cert
in namespace infra). Both read their kubeconfig from $KUBECONFIG, in an environment scrubbed
of in-cluster settings.
"""

import base64
import copy
import json
import os
import re
import subprocess
import time
import unicodedata

import pytest

from harness.certctl import run_certctl, service_with_endpoints, webhook_configuration
from harness.hostile import (HostileServer, echo_created, json_reply, raw_reply,
                             run_measured, status_doc, status_reply, stream_reply)

NS = "infra"
SECRET = "webhook-server-cert"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
SECRET_PATH = f"{SECRETS}/{SECRET}"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
VWCS = f"{ADMISSION}/validatingwebhookconfigurations"
MWCS = f"{ADMISSION}/mutatingwebhookconfigurations"
VWC_PATH = f"{VWCS}/hook"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def certctl_args(command, service="hook", targets=("--validating-webhook", "hook")):
    """`certctl job` (with a 3 s deadline) or `certctl check` in cluster mode."""
    args = [command, "--service", service, "--namespace", NS, "--request-timeout", "5s",
            *targets]
    return args + (["--wait-for-targets", "3s"] if command == "job" else [])


JOB = certctl_args("job")
CHECK = certctl_args("check")
COMMANDS = {"job": JOB, "check": CHECK}
# What each command exits with when it cannot do its work (check: 1 means "findings").
FAILED = {"job": 1, "check": 2}

# Variables run_certctl removes from the environment (in-cluster configuration).
SCRUBBED = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
            "POD_NAMESPACE", "CERTCTL_SERVICEACCOUNT_DIR")


@pytest.fixture
def api():
    """A hostile server; every test scripts its own answers."""
    with HostileServer() as server:
        yield server


@pytest.fixture
def valid_secret(certctl_binary):
    """A valid kubernetes.io/tls Secret for Service hook in infra, as the API server would
    return it (certctl generate's manifest plus uid and resourceVersion)."""
    proc = subprocess.run([certctl_binary, "generate", "--service", "hook", "-n", NS,
                           "-o", "secret-json"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    secret = json.loads(proc.stdout)
    secret["metadata"].update(uid="6f1d3a52-8c0e-4c1b-9a51-2b6a1d7e0c11",
                              resourceVersion="1001",
                              creationTimestamp="2025-01-01T00:00:00Z")
    return secret


def secret_for(secret, **changes):
    """A deep copy of `secret` with dotted paths replaced: secret_for(s, **{"a.b": 1})."""
    out = copy.deepcopy(secret)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = out
        for key in parents:
            node = node[key]
        node[leaf] = value
    return out


def vwc(ca_pem=""):
    doc = webhook_configuration("ValidatingWebhookConfiguration", "hook", ["a.hook.io"],
                                ca_bundle=ca_pem, labels={"app": "hook"})
    doc["metadata"].update(uid="0b7e8d0c-4f5e-4c55-8f4e-2d1c6b9a7e21", resourceVersion="77")
    return doc


def ca_of(secret):
    return base64.b64decode(secret["data"]["ca.crt"]).decode()


def script_targets(api, ca_pem=""):
    """The webhook configuration hook exists (with `ca_pem` as its caBundle); patches
    succeed; the Service it calls has port 443 and a ready endpoint (what check reads)."""
    api.route("GET", VWC_PATH, json_reply(vwc(ca_pem)))
    api.route("PATCH", VWC_PATH, json_reply(vwc(ca_pem)))
    service, endpoints = service_with_endpoints("hook", "infra")
    api.route("GET", "/api/v1/namespaces/infra/services/hook", json_reply(service))
    api.route("GET", "/apis/discovery.k8s.io/v1/namespaces/infra/endpointslices",
              json_reply({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList",
                          "metadata": {"resourceVersion": "1"}, "items": [endpoints]}))


def env_for(api, wrong_ca=False):
    return {"KUBECONFIG": api.kubeconfig(wrong_ca=wrong_ca)}


def certctl(binary, api, args, wrong_ca=False, timeout=50):
    """certctl with `args` against the hostile server; (result, seconds taken)."""
    started = time.monotonic()
    result = run_certctl(binary, *args, env=env_for(api, wrong_ca), timeout=timeout)
    return result, time.monotonic() - started


def measured(binary, api, args, timeout=45):
    """certctl with `args` against the hostile server through hostile.run_measured: raw
    output and its own peak RSS."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(env_for(api))
    return run_measured([binary, *args], env, timeout=timeout)


def failure_lines(stderr, command):
    return [line for line in stderr.splitlines() if line.startswith(f"certctl {command}:")]


# --- a. a body that never ends -------------------------------------------------------

def endless_json_string():
    """The start of a Secret whose name never ends: 64 KiB blocks, as fast as TCP allows."""
    yield b'{"kind":"Secret","apiVersion":"v1","metadata":{"name":"'
    block = b"x" * 65536
    while True:
        yield block


@pytest.mark.parametrize("command", ["job", "check"])
def test_endless_body_is_cut_off_in_bounded_memory(api, certctl_binary, command):
    """A server (or a man in the middle) that streams a body forever must not make certctl
    buffer it until the node's OOM killer ends the hook: the client caps a response at a
    size no API object reaches, fails, and does not ask again for more of the same."""
    api.route("GET", SECRET_PATH, stream_reply(endless_json_string))
    result = measured(certctl_binary, api, COMMANDS[command])
    assert not result.timed_out, f"still running after {result.elapsed:.0f}s"
    assert result.returncode == FAILED[command], result.stderr_text
    assert "larger than" in result.stderr_text, result.stderr_text
    assert len(api.requests("GET", SECRET_PATH)) == 1  # not retried
    # It read up to its cap: the server counts only whole blocks, and the one it was
    # writing when certctl hung up is not among them.
    sent = api.requests(path="^" + SECRET_PATH + "$")[0].bytes_sent
    assert sent > 4 * 1024 * 1024 - 65536, sent
    assert result.maxrss_kib < 64 * 1024, f"peak RSS {result.maxrss_kib} KiB"


# --- b. fields of the wrong JSON type --------------------------------------------------

WRONG_TYPES = {
    "name-number": ({"metadata.name": 12345}, "metadata.name"),
    "resourceVersion-object": ({"metadata.resourceVersion": {"rv": "1001"}},
                               "metadata.resourceVersion"),
    "data-list": ({"data": ["ca.crt", "tls.crt"]}, "data"),
}


@pytest.mark.parametrize("command", ["job", "check"])
@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_wrong_json_types_are_one_line_naming_the_field(api, certctl_binary, valid_secret,
                                                        command, case):
    """A Secret whose fields have the wrong JSON type is not a Secret: a client that
    coerces it (a list read as "no data", an object read as an empty resourceVersion)
    acts on something the server never said, e.g. replaces a CA that is fine. certctl must
    refuse the answer with one line naming the field, never leak a JSON library's
    exception text ("type_error") or report an internal error, and write nothing."""
    changes, field = WRONG_TYPES[case]
    api.route("GET", SECRET_PATH, json_reply(secret_for(valid_secret, **changes)))
    api.route("PUT", SECRET_PATH, echo_created(200, "1002"))
    script_targets(api, ca_of(valid_secret))
    result, _ = certctl(certctl_binary, api, COMMANDS[command])
    assert result.returncode == FAILED[command], (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1, result.stderr
    (line,) = failure_lines(result.stderr, command)
    assert field in line, line
    assert "type_error" not in result.stderr and "internal error" not in result.stderr
    assert [r for r in api.requests() if r.method in WRITES] == []


def test_wrong_typed_resource_version_stops_the_update_that_needs_it(api, certctl_binary,
                                                                      valid_secret):
    """When the Secret must be rewritten (the Service was renamed, so the server
    certificate is re-issued), the update is conditional on metadata.resourceVersion: an
    object there must stop the job before it sends a PUT with a made-up precondition."""
    bad = secret_for(valid_secret, **{"metadata.resourceVersion": {"rv": "1001"}})
    api.route("GET", SECRET_PATH, json_reply(bad))
    api.route("PUT", SECRET_PATH, echo_created(200, "1002"))
    script_targets(api, ca_of(valid_secret))
    result, _ = certctl(certctl_binary, api, certctl_args("job", service="renamed"))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    (line,) = failure_lines(result.stderr, "job")
    assert "metadata.resourceVersion" in line, line
    assert "type_error" not in result.stderr and "internal error" not in result.stderr
    assert [r for r in api.requests() if r.method in WRITES] == []


# --- c. continue tokens that cycle -----------------------------------------------------

def webhook_list(token, items):
    return {"kind": "ValidatingWebhookConfigurationList",
            "apiVersion": "admissionregistration.k8s.io/v1",
            "metadata": {"resourceVersion": "77", "continue": token}, "items": items}


@pytest.mark.parametrize("command", ["job", "check"])
def test_cycling_continue_tokens_end_the_list(api, certctl_binary, valid_secret, command):
    """A paginated LIST whose continue token alternates between two values never ends;
    a client that only stops on an empty token loops forever (and a hook Job hangs the
    release). certctl must notice the repetition, fail, and say so."""
    api.route("GET", SECRET_PATH, json_reply(valid_secret))
    lists = api.route("GET", VWCS, json_reply(webhook_list("a", [vwc()])),
                      json_reply(webhook_list("b", [vwc()])),
                      query={"labelSelector": "app=hook"}, cycle=True)
    api.route("GET", MWCS, json_reply({**webhook_list("", []), "kind":
                                       "MutatingWebhookConfigurationList"}))
    args = certctl_args(command, targets=("--webhook-selector", "app=hook"))
    result, elapsed = certctl(certctl_binary, api, args)
    assert result.returncode == FAILED[command], (result.stdout, result.stderr)
    (line,) = failure_lines(result.stderr, command)
    assert "continue" in line, line
    assert 2 <= lists.calls <= 10, lists.calls
    assert elapsed < 20
    assert [r for r in api.requests() if r.method in WRITES] == []


# --- d. an answer about another object -------------------------------------------------

@pytest.fixture
def victim_secret(certctl_binary):
    """A valid-looking Secret named "victim" for another Service (its certificate does
    not cover hook.infra.svc, so certctl would want to re-issue it)."""
    proc = subprocess.run([certctl_binary, "generate", "--service", "other", "-n", NS,
                           "--secret", "victim", "-o", "secret-json"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    secret = json.loads(proc.stdout)
    secret["metadata"].update(uid="9a0c5b1e-3d4f-4e6a-8b7c-1d2e3f4a5b6c", resourceVersion="2001")
    return secret


@pytest.mark.parametrize("command", ["job", "check"])
def test_foreign_object_name_is_never_acted_on(api, certctl_binary, victim_secret,
                                               command):
    """GET secrets/webhook-server-cert answered with a Secret named "victim" (one that
    needs its certificate re-issued, so a naive client would write it back): certctl must
    not address "victim" in any request, and must say the answer was for another object."""
    api.route("GET", SECRET_PATH, json_reply(victim_secret))
    api.route("*", f"{SECRETS}/victim", echo_created(200, "2002"))
    api.route("PUT", SECRET_PATH, echo_created(200, "2002"))
    script_targets(api)
    result, _ = certctl(certctl_binary, api, COMMANDS[command])
    assert result.returncode == FAILED[command], (result.stdout, result.stderr)
    assert [r for r in api.requests() if "victim" in r.path + "?" + r.query] == []
    assert [r for r in api.requests() if r.method in WRITES] == []
    (line,) = failure_lines(result.stderr, command)
    assert '"victim"' in line and "another object" in line, line


# --- e. an hour-long Retry-After -------------------------------------------------------

@pytest.mark.parametrize("where", ["secret-get", "webhook-patch"])
def test_huge_retry_after_is_capped_by_the_jobs_deadline(api, certctl_binary, valid_secret,
                                                         where):
    """429 with Retry-After: 3600 on every try. Honouring it would hang `helm install` for
    an hour; ignoring it silently would hide why the job is slow. certctl logs that it
    retries and what the server asked for, caps the wait, and gives up at its deadline
    (--wait-for-targets 3s)."""
    too_many = status_reply(429, "TooManyRequests", "Too many requests, please try again "
                            "later.", headers={"Retry-After": "3600"})
    if where == "secret-get":
        api.route("GET", SECRET_PATH, too_many)
        path, method = SECRET_PATH, "GET"
    else:
        api.route("GET", SECRET_PATH, json_reply(valid_secret))
        api.route("GET", VWC_PATH, json_reply(vwc()))
        api.route("PATCH", VWC_PATH, too_many)
        path, method = VWC_PATH, "PATCH"
    result, elapsed = certctl(certctl_binary, api, JOB)
    assert result.returncode == 1, result.stderr
    assert elapsed < 30, elapsed
    retries = [line for line in result.stderr.splitlines() if "retrying" in line]
    assert retries, result.stderr
    assert all("3600" in line for line in retries), retries
    assert "Retry-After 3600s, honoured for at most 10s" in retries[0], retries[0]
    assert len(api.requests(method, path)) >= 2


# --- f. Status messages written to attack a terminal -----------------------------------

HOSTILE_TEXT = ("first line\nsecond line\r\nthird\x1b[31m red \x1b[0m\x1b]0;owned title\x07"
                "\x1b[2J\x08\x08\tbell\x07 nul\x00 del\x7f c1\u0085\u009b31m ")
MEGABYTE = "A" * (1 << 20)


def status_bytes(code, reason, message, invalid_utf8=False):
    data = json.dumps(status_doc(code, reason, message), ensure_ascii=False).encode()
    if invalid_utf8:  # raw bytes that are not UTF-8, inside the JSON string
        data = data.replace(b"first line", b"first\xff\xfe\xc3( line", 1)
    return data


HOSTILE_BODIES = {
    "status-json": lambda code: status_bytes(code, "InternalError", HOSTILE_TEXT + MEGABYTE),
    "status-invalid-utf8": lambda code: status_bytes(code, "InternalError",
                                                     HOSTILE_TEXT + MEGABYTE, True),
    "text-plain": lambda code: (HOSTILE_TEXT + MEGABYTE).encode() + b"\xff\x1b[0m\n",
}


def assert_harmless(output, what):
    """Every line under 1000 bytes, valid UTF-8, no control character but newline."""
    for number, line in enumerate(output.split(b"\n"), 1):
        assert len(line) < 1000, f"{what} line {number} is {len(line)} bytes: {line[:200]!r}"
    assert b"\x1b" not in output, f"{what} contains ESC"
    text = output.decode("utf-8")  # raises on invalid UTF-8
    controls = sorted({c for c in text if c != "\n" and unicodedata.category(c) == "Cc"})
    assert not controls, f"{what} contains control characters {controls!r}"


@pytest.mark.parametrize("command", ["job", "check"])
@pytest.mark.parametrize("body", list(HOSTILE_BODIES))
def test_error_messages_cannot_inject_terminal_sequences(api, certctl_binary, command, body):
    """A 500 on the Secret GET whose message holds newlines (fake log lines), ANSI escape
    sequences (colours, clearing the screen, setting the terminal title), C0/C1 controls,
    invalid UTF-8 and a megabyte of text. certctl's logs end up in terminals and log
    pipelines: what it prints must stay one bounded line per event, with nothing a terminal
    interprets."""
    content_type = "text/plain; charset=utf-8" if body == "text-plain" else "application/json"
    api.route("GET", SECRET_PATH, raw_reply(HOSTILE_BODIES[body](500), 500,
                                            content_type=content_type))
    result = measured(certctl_binary, api, COMMANDS[command], timeout=40)
    assert not result.timed_out
    assert result.returncode == FAILED[command], result.stderr_text
    assert failure_lines(result.stderr_text, command), result.stderr_text
    assert "second line" in result.stderr_text  # the message is shown, made harmless
    assert_harmless(result.stderr, "stderr")
    assert_harmless(result.stdout, "stdout")


@pytest.mark.parametrize("code", [422, 500])
def test_rejected_patch_message_cannot_inject_terminal_sequences(api, certctl_binary,
                                                                valid_secret, code):
    """The same hostile Status, invalid UTF-8 included, answering the job's caBundle patch:
    a 500 (retried, its message logged each time) and a 422 (the re-read shows the object
    unchanged, so it was no failed test operation but the server's refusal: reported at
    once, with the message)."""
    api.route("GET", SECRET_PATH, json_reply(valid_secret))
    api.route("GET", VWC_PATH, json_reply(vwc()))
    reason = "Invalid" if code == 422 else "InternalError"
    api.route("PATCH", VWC_PATH, raw_reply(
        status_bytes(code, reason, HOSTILE_TEXT + MEGABYTE, invalid_utf8=True), code))
    result = measured(certctl_binary, api, JOB, timeout=40)
    assert not result.timed_out
    assert result.returncode == 1, result.stderr_text
    assert failure_lines(result.stderr_text, "job"), result.stderr_text
    patches = len(api.requests("PATCH", VWC_PATH))
    assert patches == 1 if code == 422 else patches >= 2, patches
    assert_harmless(result.stderr, "stderr")
    assert_harmless(result.stdout, "stdout")


# --- g. a server certificate from the wrong CA -----------------------------------------

@pytest.mark.parametrize("command", ["job", "check"])
def test_tls_verification_failure_is_permanent(api, certctl_binary, command):
    """The kubeconfig trusts another CA than the one that signed the server's certificate:
    the server is not who it claims to be. Retrying cannot fix that, and each try would
    hand the impostor another ClientHello; certctl must fail at once, on one connection,
    and say that the certificate did not verify."""
    api.route("*", ".*", json_reply({}))  # never reached: no request may get through
    result, elapsed = certctl(certctl_binary, api, COMMANDS[command], wrong_ca=True)
    assert result.returncode == FAILED[command], result.stderr
    assert elapsed < 10, elapsed
    assert api.wait_for(lambda: api.tls_failures), "no handshake reached the server"
    assert api.connections == 1, api.tls_failures  # tried once, not retried
    assert api.requests() == []
    assert "retrying" not in result.stderr
    (line,) = failure_lines(result.stderr, command)
    assert re.search(r"certificate|verif", line, re.IGNORECASE), line
    assert api.token not in result.stderr


# --- h. 401 and 403 -------------------------------------------------------------------

@pytest.mark.parametrize("command", ["job", "check"])
@pytest.mark.parametrize("code,reason,message", [
    (401, "Unauthorized", "Unauthorized"),
    (403, "Forbidden", f'secrets "{SECRET}" is forbidden: User "system:serviceaccount:{NS}:'
                       f'certctl" cannot get resource "secrets" in API group "" in the '
                       f'namespace "{NS}"')], ids=["401", "403"])
def test_unauthorized_and_forbidden_are_not_retried(api, certctl_binary, command, code,
                                                    reason, message):
    """401 and 403 are answers about the credentials, not the server's load: retrying them
    only adds failed-auth noise to the audit log and delays the verdict."""
    api.route("GET", SECRET_PATH, status_reply(code, reason, message))
    result, elapsed = certctl(certctl_binary, api, COMMANDS[command])
    assert result.returncode == FAILED[command], result.stderr
    assert len(api.requests()) == 1
    assert api.requests()[0].headers["authorization"] == f"Bearer {api.token}"
    assert "retrying" not in result.stderr
    (line,) = failure_lines(result.stderr, command)
    assert message in line, line
    assert api.token not in result.stderr
    assert elapsed < 10


# --- i. positive control: transient 503s on a safe read ---------------------------------

@pytest.mark.parametrize("command", ["job", "check"])
def test_three_503s_then_success_on_a_read(api, certctl_binary, valid_secret, command):
    """The hardening must not make certctl brittle: a GET is safe to repeat, so three 503s
    followed by the Secret are ridden out with backoff, and the run succeeds (the webhook
    already holds the Secret's CA, so the job writes nothing and check finds nothing).
    The job logs each wait at info; check, whose answer is its last line, at debug only."""
    busy = status_reply(503, "ServiceUnavailable", "the server is currently unable to "
                        "handle the request")
    api.route("GET", SECRET_PATH, busy, busy, busy, json_reply(valid_secret))
    script_targets(api, ca_of(valid_secret))
    result, elapsed = certctl(certctl_binary, api, COMMANDS[command])
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert [r.status for r in api.requests("GET", SECRET_PATH)] == [503, 503, 503, 200]
    retries = [line for line in result.stderr.splitlines() if "retrying in" in line]
    assert len(retries) == (3 if command == "job" else 0), result.stderr
    if command == "check":
        api.clear_routes()
        api.route("GET", SECRET_PATH, busy, busy, busy, json_reply(valid_secret))
        script_targets(api, ca_of(valid_secret))
        debug, _ = certctl(certctl_binary, api, ["--log-level", "debug", *COMMANDS[command]])
        assert debug.returncode == 0, (debug.stdout, debug.stderr)
        retries = [line for line in debug.stderr.splitlines() if "retrying in" in line]
        assert len(retries) == 3, debug.stderr
    assert [r for r in api.requests() if r.method in WRITES] == []
    assert elapsed < 20
