"""HostileServer: a tiny HTTPS "Kubernetes API" whose every answer is scripted by the test.

kubeemu behaves like kube-apiserver; this server does not have to. It exists to pin what a
client does with answers no honest API server sends: bodies that never end, fields of the
wrong JSON type, continue tokens that cycle, objects with another name than the one asked
for, hour-long Retry-After, Status messages full of escape sequences, a certificate from a
CA the client does not trust.

    with HostileServer() as api:
        api.route("GET", r"/api/v1/namespaces/infra/secrets/cert",
                  status_reply(503, "ServiceUnavailable", "busy"),   # 1st call
                  json_reply(secret))                                # 2nd call and after
        env = {"KUBECONFIG": api.kubeconfig()}
        ...run the client...
        assert len(api.requests("GET", r".*/secrets/cert")) == 2

Routes are tried in the order they were added; the first whose method, path (a regular
expression matched against the whole URL path) and query (name -> regular expression
matched against the whole value) match answers. A route answers its replies in order, one
per call, and then repeats the last one (or starts over with cycle=True). A reply may also be
a function of the Request returning a Reply. Anything unscripted gets a 404 metav1.Status.

The server listens on 127.0.0.1 on a free port and serves each connection on its own thread
(the TLS handshake too). It keeps a request log (Request records, in arrival order, logged
before the answer so a request whose answer never ends is visible) and counts the TCP
connections it accepted, including those whose TLS handshake failed. Its CA and serving
certificate (SANs localhost, 127.0.0.1, ...) are made with the openssl CLI in a temporary
directory; kubeconfig(wrong_ca=True) trusts another, unrelated CA instead.

run_measured() runs the client under test with its own peak RSS measured (wait4 through a
small fork-and-exec shim, because a child started straight from pytest reports pytest's).
"""

import base64
import datetime
import http.server
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from kubeemu import tlsgen

MAX_REQUEST_BODY = 8 * 1024 * 1024
HANDSHAKE_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


# --- replies ----------------------------------------------------------------------------

class Reply:
    """One scripted answer. Build it with the *_reply functions below.

    status, headers (name -> value or list of values); then exactly one of: body (bytes,
    sent with Content-Length), stream (a function returning an iterable of bytes, sent
    chunked, one chunk per item, called anew for every request) or close (send nothing and
    close the connection; reset=True aborts it with a TCP RST). delay: seconds to wait first.
    """

    def __init__(self, status=200, headers=None, body=b"", stream=None, close=False,
                 reset=False, delay=0.0):
        self.status = status
        self.headers = dict(headers or {})
        self.body = body
        self.stream = stream
        self.close = close
        self.reset = reset
        self.delay = delay

    def __repr__(self):
        kind = "close" if self.close else "stream" if self.stream else f"{len(self.body)} bytes"
        return f"Reply({self.status}, {kind})"


def json_reply(obj, status=200, headers=None, delay=0.0):
    """A JSON document (Content-Type application/json)."""
    data = (json.dumps(obj) + "\n").encode("utf-8")
    return Reply(status, {"Content-Type": "application/json", **(headers or {})}, data,
                 delay=delay)


def raw_reply(data, status=200, content_type="application/json", headers=None, delay=0.0):
    """Bytes exactly as given (str is encoded as UTF-8): broken JSON, invalid UTF-8..."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return Reply(status, {"Content-Type": content_type, **(headers or {})}, data, delay=delay)


def status_doc(code, reason, message, details=None):
    """A metav1.Status failure document."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details or {}, "code": code}


def status_reply(code, reason, message, headers=None, details=None, delay=0.0):
    """A metav1.Status failure with HTTP status `code`."""
    return json_reply(status_doc(code, reason, message, details), code, headers, delay)


def stream_reply(chunks, status=200, content_type="application/json", headers=None):
    """A chunked body: `chunks` is a function returning an iterable of bytes (called per
    request, so a generator function gives every request its own, possibly endless, stream).
    The stream ends when the iterable does, the client goes away or the server stops."""
    if not callable(chunks):
        raise TypeError("stream_reply takes a function returning an iterable of bytes")
    return Reply(status, {"Content-Type": content_type, **(headers or {})}, stream=chunks)


def close_reply(reset=False, delay=0.0):
    """No answer at all: the connection is closed (reset=True: aborted with a TCP RST)."""
    return Reply(0, close=True, reset=reset, delay=delay)


def not_found_reply(message="the server could not find the requested resource"):
    return status_reply(404, "NotFound", message)


def echo_created(status=201, resource_version="1"):
    """A reply function for POST/PUT: the request's JSON body with metadata.uid,
    resourceVersion and creationTimestamp added, as an API server stores an object."""
    def reply(request):
        obj = request.json()
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", "00000000-0000-4000-8000-" + secrets.token_hex(6))
        meta["resourceVersion"] = resource_version
        meta.setdefault("creationTimestamp", datetime.datetime.now(datetime.timezone.utc)
                        .strftime("%Y-%m-%dT%H:%M:%SZ"))
        return json_reply(obj, status)
    return reply


# --- routes and the request log ---------------------------------------------------------

class Route:
    """A scripted path: see HostileServer.route. `calls` counts the requests it answered."""

    def __init__(self, method, path, replies, query=None, cycle=False):
        if not replies:
            raise ValueError("a route needs at least one reply")
        self.method = method.upper()
        self.path = re.compile(path)
        self.query = {name: re.compile(value) for name, value in (query or {}).items()}
        self.replies = list(replies)
        self.cycle = cycle
        self.calls = 0

    def matches(self, method, path, params):
        if self.method not in ("*", method) or not self.path.fullmatch(path):
            return False
        for name, pattern in self.query.items():
            values = params.get(name)
            if not values or not pattern.fullmatch(values[0]):
                return False
        return True

    def next_reply(self):
        """The reply for the next call (the caller holds the server's lock)."""
        if self.cycle:
            reply = self.replies[self.calls % len(self.replies)]
        else:
            reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return reply

    def __repr__(self):
        return f"Route({self.method} {self.path.pattern}, calls={self.calls})"


class Request:
    """One logged request. headers: lower-case name -> value; time: time.monotonic() at
    arrival; connection: the number of the TCP connection it came on (1, 2, ...); status: the
    HTTP status answered (0 for a closed connection, None until an answer was chosen);
    bytes_sent: body bytes written so far (grows while a stream runs)."""

    def __init__(self, method, path, query, headers, body, connection):
        self.method = method
        self.path = path
        self.query = query
        self.params = urllib.parse.parse_qs(query, keep_blank_values=True)
        self.headers = headers
        self.body = body
        self.connection = connection
        self.time = time.monotonic()
        self.status = None
        self.bytes_sent = 0
        self.route = None

    def param(self, name, default=None):
        values = self.params.get(name)
        return values[0] if values else default

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        query = f"?{self.query}" if self.query else ""
        return f"<{self.method} {self.path}{query} -> {self.status}>"


# --- the server -------------------------------------------------------------------------

class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hostile"
    sys_version = ""

    def __init__(self, request, client_address, server, connection_id):
        self.connection_id = connection_id
        super().__init__(request, client_address, server)

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = lambda self: self._serve()

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return body
                if len(body) + size > MAX_REQUEST_BODY:
                    raise ConnectionError("request body too large")
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BODY:
            raise ConnectionError("request body too large")
        return self.rfile.read(length) if length else b""

    def _serve(self):
        hostile = self.server.hostile
        url = urllib.parse.urlsplit(self.path)
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            body = self._read_body()
        except (ValueError, ConnectionError, OSError):
            self.close_connection = True
            return
        request = Request(self.command, url.path, url.query, headers, body, self.connection_id)
        reply = hostile._dispatch(request)
        if not isinstance(reply, Reply):  # a function of the request
            try:
                reply = reply(request)
            except Exception as e:  # a bug in the test's script: say so, keep serving
                hostile.errors.append(f"{request!r}: {type(e).__name__}: {e}")
                reply = status_reply(500, "InternalError",
                                     f"hostile: reply function raised {type(e).__name__}: {e}")
        hostile._answered(request, reply.status)
        if reply.delay and hostile._stopping.wait(reply.delay):
            self.close_connection = True
            return
        if reply.close:
            self.close_connection = True
            if reply.reset:
                # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           b"\x01\x00\x00\x00\x00\x00\x00\x00")
            return
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            for item in value if isinstance(value, list) else [value]:
                self.send_header(name, str(item))
        if reply.stream is not None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._stream(request, reply.stream())
        else:
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
            hostile._sent(request, len(reply.body))

    def _stream(self, request, chunks):
        hostile = self.server.hostile
        try:
            for chunk in chunks:
                if hostile._stopping.is_set():
                    self.close_connection = True
                    return
                if not chunk:
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                hostile._sent(request, len(chunk))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, hostile, ssl_context):
        self.hostile = hostile
        self.ssl_context = ssl_context
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request, client_address):
        number = self.hostile._accepted(request)
        thread = threading.Thread(target=self._serve_connection,
                                  args=(request, client_address, number),
                                  name=f"hostile-{self.hostile.port}-conn-{number}",
                                  daemon=True)
        self.hostile._threads.append(thread)
        thread.start()

    def _serve_connection(self, request, client_address, number):
        hostile = self.hostile
        conn = request
        try:
            request.settimeout(HANDSHAKE_TIMEOUT)
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                conn = self.ssl_context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                hostile._handshake_failed(number, e)
                return
            hostile._track(number, conn)
            conn.settimeout(None)
            try:
                _Handler(conn, client_address, self, number)
            except (ConnectionError, ssl.SSLError, OSError, ValueError):
                pass
        finally:
            try:
                conn.close()
            except OSError:
                pass
            hostile._untrack(number)


class HostileServer:
    """The scripted server; a context manager that starts it and always stops it."""

    def __init__(self, token=None):
        self.token = token or "hostile-" + secrets.token_hex(16)
        self.tmp = None
        self.url = None
        self.port = None
        self._routes = []
        self._log = []
        self._connections = 0
        self._tls_failures = []
        self._active = {}  # connection number -> its socket (plain, then TLS)
        self._threads = []
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._server = None
        self._thread = None
        self._wrong_ca = None
        self.errors = []  # exceptions raised by reply functions (answered with a 500)

    # --- lifecycle --------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="hostile-")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self):
        pki = tlsgen.generate(self._mkdir("pki"))
        self.ca_path = pki["ca.crt"]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(pki["server.crt"], pki["server.key"])
        ctx.set_alpn_protocols(["http/1.1"])
        self._server = _Server(self, ctx)
        self.port = self._server.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="hostile-accept", daemon=True)
        self._thread.start()

    def stop(self):
        """Stop accepting, end every stream and connection, join the threads."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._thread.join(STOP_TIMEOUT)
            self._server.server_close()
            with self._lock:
                sockets = list(self._active.values())
            for sock in sockets:
                try:  # the plain socket's shutdown: wakes a thread blocked in read or write
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass
            deadline = time.monotonic() + STOP_TIMEOUT
            for thread in self._threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            self._server = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def _mkdir(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path, exist_ok=True)
        return path

    # --- scripting ----------------------------------------------------------------------

    def route(self, method, path, *replies, query=None, cycle=False):
        """Script `method` (or "*") on paths fully matching the regex `path` (and whose
        query parameters fully match `query`, name -> regex): the replies answer successive
        calls, the last one repeats (cycle=True: start over). Returns the Route."""
        route = Route(method, path, replies, query=query, cycle=cycle)
        with self._lock:
            self._routes.append(route)
        return route

    def clear_routes(self):
        with self._lock:
            self._routes.clear()

    def _dispatch(self, request):
        with self._lock:
            self._log.append(request)
            for route in self._routes:
                if route.matches(request.method, request.path, request.params):
                    request.route = route
                    reply = route.next_reply()
                    break
            else:
                reply = not_found_reply()
            self._lock.notify_all()
        return reply

    # --- bookkeeping (called from connection threads) ------------------------------------

    def _accepted(self, sock):
        with self._lock:
            self._connections += 1
            self._active[self._connections] = sock
            self._lock.notify_all()
            return self._connections

    def _track(self, number, sock):
        with self._lock:
            self._active[number] = sock

    def _untrack(self, number):
        with self._lock:
            self._active.pop(number, None)
            self._lock.notify_all()

    def _handshake_failed(self, number, error):
        with self._lock:
            self._tls_failures.append((number, f"{type(error).__name__}: {error}"))
            self._lock.notify_all()

    def _answered(self, request, status):
        with self._lock:
            request.status = status
            self._lock.notify_all()

    def _sent(self, request, count):
        with self._lock:
            request.bytes_sent += count

    # --- observations ---------------------------------------------------------------------

    def requests(self, method=None, path=None):
        """Logged requests, oldest first; `path` is a regex searched in the URL path."""
        with self._lock:
            log = list(self._log)
        return [r for r in log if (method is None or r.method == method)
                and (path is None or re.search(path, r.path))]

    def reset_log(self):
        with self._lock:
            self._log.clear()

    @property
    def connections(self):
        """TCP connections accepted so far, whether or not their TLS handshake succeeded."""
        with self._lock:
            return self._connections

    @property
    def open_connections(self):
        """Connections not yet closed (a stream still running keeps its connection open)."""
        with self._lock:
            return len(self._active)

    @property
    def tls_failures(self):
        """(connection number, error) for each connection whose TLS handshake failed."""
        with self._lock:
            return list(self._tls_failures)

    def wait_for(self, predicate, timeout=10.0):
        """Wait until predicate() (called with the server's state changing) is true;
        returns its last value (falsy on timeout)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                value = predicate()
                remaining = deadline - time.monotonic()
                if value or remaining <= 0:
                    return value
                self._lock.wait(min(remaining, 0.5))

    # --- client configuration -------------------------------------------------------------

    def wrong_ca_path(self):
        """A CA certificate that did not sign the server's certificate (made on first use)."""
        if self._wrong_ca is None:
            self._wrong_ca = tlsgen.generate(self._mkdir("wrong-pki"))["ca.crt"]
        return self._wrong_ca

    def kubeconfig(self, wrong_ca=False, token=None, server=None):
        """Write a kubeconfig (bearer token, certificate-authority-data) and return its
        path; wrong_ca=True trusts an unrelated CA, so verifying the server must fail."""
        ca_file = self.wrong_ca_path() if wrong_ca else self.ca_path
        with open(ca_file, "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "hostile",
               "clusters": [{"name": "hostile", "cluster": {
                   "server": server or self.url, "certificate-authority-data": ca}}],
               "users": [{"name": "hostile", "user": {"token": token or self.token}}],
               "contexts": [{"name": "hostile", "context": {
                   "cluster": "hostile", "user": "hostile", "namespace": "default"}}]}
        path = os.path.join(self.tmp, "wrong-ca.kubeconfig" if wrong_ca else "kubeconfig")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.chmod(path, 0o600)
        return path

    def ssl_context(self, wrong_ca=False):
        """A client context trusting the server's CA (or the wrong one)."""
        return ssl.create_default_context(cafile=self.wrong_ca_path() if wrong_ca
                                          else self.ca_path)


# --- running the client under test with its peak memory measured --------------------------

# ru_maxrss of a process started straight from the test is useless: subprocess starts it
# with vfork, and exec records the peak RSS of the memory it replaces, which is the test
# process's own (tens of MiB under pytest). This shim, a small Python process, forks the
# real child instead (the copy it execs from holds only the shim's few MiB), waits for it
# with wait4 and writes "<ru_maxrss KiB> <wait status>" to the report file.
_RUSAGE_SHIM = r"""
import os, sys
report, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    f.write(f"{usage.ru_maxrss} {status}")
"""


class Measured:
    """A finished process: returncode, stdout/stderr as bytes (stdout_text/stderr_text
    decoded, invalid UTF-8 replaced), maxrss_kib (its own peak RSS), elapsed (seconds) and
    timed_out (it was killed after the time limit)."""

    def __init__(self, returncode, stdout, stderr, maxrss_kib, elapsed, timed_out):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.stdout_text = stdout.decode("utf-8", errors="replace")
        self.stderr_text = stderr.decode("utf-8", errors="replace")
        self.maxrss_kib = maxrss_kib
        self.elapsed = elapsed
        self.timed_out = timed_out


def run_measured(argv, env, timeout=45.0):
    """Run argv (argv[0] an absolute path) with exactly `env`, output to temporary files,
    and measure its peak resident set size with wait4(2). A pidfd tells when it ends; after
    `timeout` seconds its process group is killed."""
    with tempfile.TemporaryDirectory(prefix="measured-") as tmp:
        report = os.path.join(tmp, "rusage")
        with open(os.path.join(tmp, "out"), "w+b") as out, \
                open(os.path.join(tmp, "err"), "w+b") as err:
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-S", "-I", "-c", _RUSAGE_SHIM, report,
                                     *argv], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, env=env, start_new_session=True)
            pidfd = os.pidfd_open(proc.pid)
            try:
                ended, _, _ = select.select([pidfd], [], [], timeout)
                if not ended:
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            finally:
                os.close(pidfd)
            elapsed = time.monotonic() - started
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        try:
            with open(report, encoding="ascii") as f:
                maxrss, status = (int(field) for field in f.read().split())
            returncode = os.waitstatus_to_exitcode(status)
        except (OSError, ValueError):  # the shim was killed before it could report
            maxrss, returncode = 0, proc.returncode
    return Measured(returncode, stdout, stderr, maxrss, elapsed, not ended)
