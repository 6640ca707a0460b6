"""The hostile fake API server (harness/hostile.py) itself: scripted sequences, endless
streams, the request log, the connection count and a kubeconfig that trusts the wrong CA.

The certctl tests built on it (tests/certctl/test_hostile_server.py) only mean something if
the server really sends what the script says, counts what really reached it and really
presents a certificate the wrong-CA kubeconfig cannot verify; these tests prove that with
plain Python clients and the openssl CLI.
"""

import base64
import http.client
import json
import socket
import ssl
import subprocess
import threading
import time

import pytest

from harness.hostile import (HostileServer, close_reply, echo_created, json_reply, raw_reply,
                             run_measured, status_reply, stream_reply)


@pytest.fixture
def api():
    with HostileServer() as server:
        yield server


def connect(api, context=None, timeout=10):
    return http.client.HTTPSConnection("127.0.0.1", api.port,
                                       context=context or api.ssl_context(), timeout=timeout)


def call(api, method, path, body=None, headers=None, conn=None):
    """One request; returns (status, headers, body). Reuses `conn` when given."""
    own = conn is None
    conn = conn or connect(api)
    try:
        hdrs = {"Authorization": f"Bearer {api.token}", **(headers or {})}
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        if own:
            conn.close()


def test_replies_follow_the_script_then_repeat_the_last(api):
    api.route("GET", r"/api/v1/namespaces/ns/secrets/s",
              status_reply(503, "ServiceUnavailable", "busy", headers={"Retry-After": "1"}),
              json_reply({"kind": "Secret", "metadata": {"name": "s"}}))
    first = call(api, "GET", "/api/v1/namespaces/ns/secrets/s")
    assert first[0] == 503 and first[1]["Retry-After"] == "1"
    assert json.loads(first[2])["reason"] == "ServiceUnavailable"
    for _ in range(3):  # the last reply answers every later call
        status, headers, body = call(api, "GET", "/api/v1/namespaces/ns/secrets/s")
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert json.loads(body)["metadata"]["name"] == "s"
    # The path regex must match the whole path.
    assert call(api, "GET", "/api/v1/namespaces/ns/secrets/s2")[0] == 404


def test_cycle_method_query_and_first_match(api):
    alternating = api.route("GET", r"/apis/x/v1/things", json_reply({"n": "a"}),
                            json_reply({"n": "b"}), query={"labelSelector": "app=x"},
                            cycle=True)
    api.route("GET", r"/apis/x/v1/things", json_reply({"n": "any query"}))
    api.route("*", r"/apis/x/v1/things", json_reply({"n": "any method"}))
    seen = [json.loads(call(api, "GET", "/apis/x/v1/things?limit=5&labelSelector=app%3Dx")[2])
            ["n"] for _ in range(5)]
    assert seen == ["a", "b", "a", "b", "a"]
    assert alternating.calls == 5
    assert json.loads(call(api, "GET", "/apis/x/v1/things?labelSelector=app%3Dy")[2]) == {
        "n": "any query"}
    assert json.loads(call(api, "DELETE", "/apis/x/v1/things")[2]) == {"n": "any method"}


def test_unscripted_requests_get_a_404_status(api):
    status, headers, body = call(api, "GET", "/version")
    assert status == 404 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server could not find the requested resource", "reason": "NotFound",
        "details": {}, "code": 404}


def test_reply_functions_raw_bytes_and_delay(api):
    api.route("POST", r"/api/v1/namespaces/ns/secrets", echo_created(resource_version="42"))
    api.route("GET", r"/raw", raw_reply(b"\xff\x1b[31m{not json", 500, content_type="text/plain"))
    api.route("GET", r"/slow", json_reply({}, delay=0.3))
    status, _, body = call(api, "POST", "/api/v1/namespaces/ns/secrets",
                           body=json.dumps({"kind": "Secret", "metadata": {"name": "s"}}),
                           headers={"Content-Type": "application/json"})
    created = json.loads(body)
    assert status == 201 and created["metadata"]["name"] == "s"
    assert created["metadata"]["resourceVersion"] == "42" and created["metadata"]["uid"]
    status, headers, body = call(api, "GET", "/raw")
    assert (status, headers["Content-Type"], body) == (500, "text/plain",
                                                       b"\xff\x1b[31m{not json")
    started = time.monotonic()
    assert call(api, "GET", "/slow")[0] == 200
    assert time.monotonic() - started >= 0.3
    # A reply function that fails answers 500 and is reported, the server keeps serving.
    api.route("GET", r"/broken", lambda request: 1 / 0)
    status, _, body = call(api, "GET", "/broken")
    assert status == 500 and b"ZeroDivisionError" in body
    assert len(api.errors) == 1 and "/broken" in api.errors[0]
    assert call(api, "GET", "/raw")[0] == 500


def test_request_log_records_what_arrived(api):
    api.route("PUT", r"/api/v1/namespaces/ns/secrets/s", json_reply({}))
    before = time.monotonic()
    conn = connect(api)
    try:  # two requests on one kept-alive connection
        call(api, "GET", "/api/v1/namespaces/ns/secrets?limit=2&continue=abc", conn=conn)
        call(api, "PUT", "/api/v1/namespaces/ns/secrets/s", body=b'{"a":1}',
             headers={"Content-Type": "application/json", "X-Test": "yes"}, conn=conn)
    finally:
        conn.close()
    first, second = api.requests()
    assert (first.method, first.path, first.query) == (
        "GET", "/api/v1/namespaces/ns/secrets", "limit=2&continue=abc")
    assert first.param("continue") == "abc" and first.params["limit"] == ["2"]
    assert first.headers["authorization"] == f"Bearer {api.token}"
    assert first.status == 404 and first.route is None
    assert (second.method, second.status, second.json()) == ("PUT", 200, {"a": 1})
    assert second.headers["x-test"] == "yes" and second.route is not None
    assert before <= first.time <= second.time <= time.monotonic()
    assert first.connection == second.connection == 1 and api.connections == 1
    assert api.requests("PUT") == [second]
    assert api.requests(path=r"/secrets$") == [first]
    api.reset_log()
    assert api.requests() == []


def test_endless_stream_is_chunked_until_the_client_leaves(api):
    def forever():
        yield b'{"kind":"Secret","metadata":{"name":"'
        block = b"x" * 65536
        while True:
            yield block

    api.route("GET", r"/endless", stream_reply(forever))
    conn = connect(api)
    conn.request("GET", "/endless")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Transfer-Encoding") == "chunked"
    received = 0
    while received < 8 * 1024 * 1024:  # http.client decodes the chunked framing
        data = resp.read(1 << 20)
        assert data
        received += len(data)
    (request,) = api.requests(path="/endless")
    # The server counts a block once its write returns, which can be after the client read it.
    assert api.wait_for(lambda: request.bytes_sent >= received, timeout=5), \
        (request.bytes_sent, received)
    conn.close()
    # The stream's thread notices the client is gone and ends the connection.
    assert api.wait_for(lambda: api.open_connections == 0, timeout=10), "stream still running"
    # Each request gets its own stream: the reply's function is called anew.
    conn = connect(api)
    conn.request("GET", "/endless")
    assert conn.getresponse().read(10) == b'{"kind":"S'
    conn.close()


def test_a_finite_stream_ends_with_the_terminating_chunk(api):
    api.route("GET", r"/chunks", stream_reply(lambda: iter([b'{"a":', b"", b'"b"}'])))
    assert call(api, "GET", "/chunks")[2] == b'{"a":"b"}'


def test_close_reply_sends_nothing(api):
    api.route("GET", r"/close", close_reply())
    api.route("GET", r"/reset", close_reply(reset=True))
    with pytest.raises(http.client.RemoteDisconnected):
        call(api, "GET", "/close")
    with pytest.raises((ConnectionResetError, http.client.RemoteDisconnected, ssl.SSLError)):
        call(api, "GET", "/reset")
    assert [r.status for r in api.requests()] == [0, 0]


def test_connections_are_counted_even_without_a_handshake(api):
    # A bare TCP connection that never speaks TLS, and one that fails verification.
    with socket.create_connection(("127.0.0.1", api.port)):
        pass
    with pytest.raises(ssl.SSLCertVerificationError):
        call(api, "GET", "/", conn=connect(api, api.ssl_context(wrong_ca=True)))
    assert api.wait_for(lambda: len(api.tls_failures) == 2)
    assert api.connections == 2
    assert api.requests() == []
    call(api, "GET", "/")
    assert api.connections == 3


def kubeconfig_ca(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    cluster = doc["clusters"][0]["cluster"]
    return doc, cluster["server"], base64.b64decode(cluster["certificate-authority-data"])


@pytest.mark.parametrize("hostname", ["127.0.0.1", "localhost"])
def test_kubeconfig_verifies_and_the_wrong_ca_one_does_not(api, tmp_path, hostname):
    doc, server, ca = kubeconfig_ca(api.kubeconfig())
    assert server == api.url
    assert doc["users"][0]["user"]["token"] == api.token
    right = ssl.create_default_context(cadata=ca.decode())
    with socket.create_connection(("127.0.0.1", api.port)) as raw:
        with right.wrap_socket(raw, server_hostname=hostname) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")

    _, wrong_server, wrong_ca = kubeconfig_ca(api.kubeconfig(wrong_ca=True))
    assert wrong_server == api.url and wrong_ca != ca
    wrong = ssl.create_default_context(cadata=wrong_ca.decode())
    with socket.create_connection(("127.0.0.1", api.port)) as raw:
        with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
            wrong.wrap_socket(raw, server_hostname=hostname)

    # The same verdicts from the openssl CLI.
    for name, pem, ok in (("right", ca, True), ("wrong", wrong_ca, False)):
        ca_file = tmp_path / f"{name}.crt"
        ca_file.write_bytes(pem)
        host_check = ["-verify_ip", hostname] if hostname[0].isdigit() else [
            "-verify_hostname", hostname]
        proc = subprocess.run(
            ["openssl", "s_client", "-connect", f"127.0.0.1:{api.port}", "-CAfile",
             str(ca_file), "-verify_return_error", *host_check, "-brief"],
            input=b"", capture_output=True, timeout=20)
        output = (proc.stdout + proc.stderr).decode(errors="replace")
        if ok:
            assert proc.returncode == 0, output
            assert "Verification: OK" in output
        else:
            assert proc.returncode != 0, output
            assert "unable to get local issuer certificate" in output


def test_stop_ends_open_streams_and_keep_alive_connections():
    def forever():
        while True:
            yield b"y" * 4096

    server = HostileServer()
    server.start()
    try:
        server.route("GET", r"/endless", stream_reply(forever))
        idle = connect(server)  # a kept-alive connection waiting for its next request
        call(server, "GET", "/version", conn=idle)
        streaming = connect(server)
        streaming.request("GET", "/endless")
        resp = streaming.getresponse()
        resp.read(4096)  # then stop reading: the server blocks writing into a full socket
        assert server.wait_for(lambda: server.requests(path="/endless")[0].bytes_sent > 0)
        port = server.port
    finally:
        started = time.monotonic()
        server.stop()
    assert time.monotonic() - started < 3
    assert server.open_connections == 0
    assert not [t for t in threading.enumerate() if t.name.startswith(f"hostile-{port}-")]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
    idle.close()
    streaming.close()


def test_concurrent_connections_are_served_in_parallel(api):
    api.route("GET", r"/slow", json_reply({}, delay=0.5))
    results = []
    threads = [threading.Thread(target=lambda: results.append(call(api, "GET", "/slow")[0]))
               for _ in range(4)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [200] * 4
    assert time.monotonic() - started < 1.5
    assert api.connections == 4


def test_run_measured_reports_the_childs_own_peak_memory():
    """ru_maxrss of a process this test starts directly would be at least this test
    process's RSS (vfork + exec); run_measured must report the child's own peak."""
    ballast = bytearray(96 << 20)  # make the test process big: 96 MiB touched
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    small = run_measured(["/bin/sh", "-c", "printf out; printf err >&2; exit 3"],
                         env={"PATH": "/usr/bin:/bin"})
    assert (small.returncode, small.stdout, small.stderr) == (3, b"out", b"err")
    assert 0 < small.maxrss_kib < 32 * 1024, small.maxrss_kib
    del ballast
    grow = ("x = bytearray(80 << 20)\n"
            "for i in range(0, len(x), 4096): x[i] = 1\n")
    big = run_measured(["/usr/bin/python3", "-S", "-c", grow], env={})
    assert big.returncode == 0, big.stderr
    assert big.maxrss_kib > 80 * 1024, big.maxrss_kib

    started = time.monotonic()
    slow = run_measured(["/bin/sleep", "30"], env={}, timeout=0.5)
    assert slow.timed_out and slow.returncode == -9
    assert time.monotonic() - started < 5
