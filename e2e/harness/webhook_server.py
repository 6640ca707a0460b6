#!/usr/bin/env python3
"""An example admission webhook server that serves the certificate folder `certctl run`
keeps, and picks up every new pair without a restart. Python standard library only.

    python3 webhook_server.py --cert-dir DIR --listen 127.0.0.1:9443 [--ready-timeout 60]

It prints `LISTENING https://HOST:PORT` on stdout once it serves (port 0 picks a free one)
and logs to stderr (with --log-reviews, a line for each review it answers). Endpoints:
`POST /validate` (admission.k8s.io/v1 AdmissionReview: allowed, unless the object carries
the label `certctl-example/deny`), `POST /convert` (apiextensions.k8s.io/v1
ConversionReview for CRD versions that differ only in name: each object gets the desired
apiVersion), `GET /apis/GROUP/VERSION` (the discovery document of an aggregated API
without resources, which is what the aggregator's availability check asks for), `GET
/healthz`.
SIGTERM and SIGINT stop it with exit 0; it exits 1 when no pair shows up within
--ready-timeout, 2 on bad arguments or an address it cannot bind.

How it consumes the folder (the part worth copying into a real webhook):

- certctl, like the kubelet for a mounted Secret, writes each new pair into a fresh folder
  `DIR/..<timestamp>.<random>` and then renames the link `DIR/..data` over to point at it;
  `DIR/tls.crt` and `DIR/tls.key` are links through `..data`. The folder `..data` points
  at is never changed afterwards, so reading both files from *that* folder gives a
  certificate and a key of the same pair. Reading them through `..data` could straddle a
  swap and pair the old key with the new certificate.
- The target of `..data` is the version. A poller looks at it every 100 ms; when it moves,
  the pair is loaded into a fresh SSLContext. Only a context whose certificate and key
  loaded together (load_cert_chain refuses a key that does not match) replaces the one in
  service; otherwise the old one keeps serving, the failure is logged once and the load is
  retried at every look (a careless writer may still complete the set). A load that the
  next swap overtook is dropped: the newer set is taken at the next look.
- Every accepted connection is wrapped with the context in service at that moment and
  keeps it to the end. Replacing the reference is atomic, so a handshake never meets a
  half-loaded context, and connections already open are not disturbed by a swap.
- A plain folder without `..data` (`certctl generate --out-dir`) works too: there the
  files' identity (inode, size, modification time) is the version.
"""

import argparse
import base64
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

POLL_INTERVAL = 0.1           # seconds between two looks at the folder
HANDSHAKE_TIMEOUT = 10.0      # a client that stalls its handshake is dropped
IDLE_TIMEOUT = 30.0           # ... and so is a kept-alive connection left idle
MAX_BODY = 3 * 1024 * 1024    # the API server's own limit on an object is about 3 MiB
DENY_LABEL = "certctl-example/deny"
LOG_REVIEWS = False           # --log-reviews: a line for every review answered


def log(message):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    print(f"{stamp}Z webhook-server: {message}", file=sys.stderr, flush=True)


# --- the certificate folder ----------------------------------------------------------------

def leaf_serial(pem):
    """The serial number of the first certificate in `pem` as uppercase hex, the way
    `openssl x509 -noout -serial` prints it (the stdlib has no public X.509 parser, and
    DER puts the serial at a fixed place: Certificate > TBSCertificate > [version] > serial)."""
    text = pem.decode("ascii", "replace")
    begin = text.index("-----BEGIN CERTIFICATE-----") + len("-----BEGIN CERTIFICATE-----")
    der = base64.b64decode(text[begin:text.index("-----END CERTIFICATE-----", begin)])

    def header(pos):
        """(tag, start of content, end of content) of the DER element at pos."""
        tag, length, pos = der[pos], der[pos + 1], pos + 2
        if length & 0x80:
            count = length & 0x7F
            length, pos = int.from_bytes(der[pos:pos + count], "big"), pos + count
        return tag, pos, pos + length

    _, cert, _ = header(0)                 # Certificate SEQUENCE
    _, tbs, _ = header(cert)               # TBSCertificate SEQUENCE
    tag, start, end = header(tbs)
    if tag == 0xA0:                        # [0] EXPLICIT version, absent for v1
        tag, start, end = header(end)
    if tag != 0x02:
        raise ValueError("no serial number where DER puts it")
    return der[start:end].lstrip(b"\0").hex().upper() or "00"


def no_password():
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key.
    raise ValueError("the key is encrypted")


def load_pair(folder):
    """A server SSLContext for folder/tls.crt and folder/tls.key, and the leaf's serial.
    Raises OSError (a file missing), ssl.SSLError (unparsable, or a key that does not
    match the certificate) or ValueError."""
    cert, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
    missing = [os.path.basename(p) for p in (cert, key) if not os.path.exists(p)]
    if missing:  # load_cert_chain would not say which one
        raise FileNotFoundError(f"no {' and no '.join(missing)}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # The API server offers h2 and http/1.1; this server speaks HTTP/1.1 only.
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(cert, key, password=no_password)
    with open(cert, "rb") as f:
        serial = leaf_serial(f.read())
    return context, serial


class CertFolder:
    """The folder's current version and where its pair is: (version, folder) or
    (None, None) while it holds no pair."""

    def __init__(self, path):
        self.path = path

    def current(self):
        try:
            target = os.readlink(os.path.join(self.path, "..data"))
        except OSError:
            pass  # no ..data link: a plain folder
        else:
            # Read from the set ..data names, never through ..data itself (see above).
            return ("..data", target), os.path.join(self.path, target)
        try:
            stats = [os.stat(os.path.join(self.path, name)) for name in ("tls.crt", "tls.key")]
        except OSError:
            return None, None
        return ("files", tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)), self.path


class Reloader:
    """Holds the SSLContext in service and replaces it when the folder moves on."""

    def __init__(self, cert_dir):
        self.folder = CertFolder(cert_dir)
        self.context = None      # read by the accept loop; replaced, never modified
        self.version = None
        self.serial = None
        self.last_error = None   # (version, message) of the last failure, logged once

    def poll(self):
        """Loads a new pair if there is one; True while a context is in service."""
        version, where = self.folder.current()
        if version is None or version == self.version:
            return self.context is not None
        try:
            context, serial = load_pair(where)
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            # A set swapped out (and removed) while it was read is no failure: the next
            # look finds the new one.
            if self.folder.current()[0] == version:
                self.fail(version, where, f"{type(e).__name__}: {e}")
            return self.context is not None
        if self.folder.current()[0] != version:
            return self.context is not None  # moved on while we read: load the newer one
        first = self.context is None
        self.context, self.version, self.serial = context, version, serial
        self.last_error = None
        log(f"{'loaded' if first else 'reloaded'} the certificate: serial={serial} "
            f"from {where}")
        return True

    def fail(self, version, where, message):
        if self.last_error == (version, message):
            return  # retried every poll (a set may still be completed), logged once
        self.last_error = (version, message)
        keeping = f"still serving serial={self.serial}" if self.context else "nothing to serve yet"
        log(f"not loading the pair in {where} ({message}); {keeping}")

    def run(self, stop):
        while not stop.wait(POLL_INTERVAL):
            try:
                self.poll()
            except Exception as e:  # the poller must outlive any surprise
                log(f"reload check failed: {type(e).__name__}: {e}")


# --- admission ----------------------------------------------------------------------------

def admission_response(request):
    """The `response` of an AdmissionReview for its `request`: allowed, unless the object
    (the old one for a DELETE) carries the label DENY_LABEL."""
    obj = request.get("object") or request.get("oldObject") or {}
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    labels = (metadata or {}).get("labels") or {}
    response = {"uid": request["uid"], "allowed": True}
    if isinstance(labels, dict) and DENY_LABEL in labels:
        kind = (request.get("kind") or {}).get("kind", "object")
        name = request.get("name") or (metadata or {}).get("name") or ""
        response["allowed"] = False
        response["status"] = {"code": 403, "reason": "Forbidden",
                              "message": f"{kind} {name} denied: it carries the label "
                                         f"{DENY_LABEL}"}
    return response


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the API server keeps its connections alive
    server_version = "certctl-example-webhook"
    timeout = IDLE_TIMEOUT

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        parts = path.strip("/").split("/")
        if path == "/healthz":
            self.reply(200, b"ok\n", "text/plain; charset=utf-8")
        elif len(parts) == 3 and parts[0] == "apis":
            if LOG_REVIEWS:
                log(f"discovery {path}")
            document = {"kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": f"{parts[1]}/{parts[2]}", "resources": []}
            self.reply(200, json.dumps(document).encode(), "application/json")
        else:
            self.reply(404, b"not found\n", "text/plain; charset=utf-8")

    def do_POST(self):
        # The API server calls the configured path with a query (?timeout=10s).
        path = self.path.split("?", 1)[0]
        if path not in ("/validate", "/convert"):
            self.reply(404, b"not found\n", "text/plain; charset=utf-8")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.reply(411, b"Content-Length required\n", "text/plain; charset=utf-8")
            return
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True  # the body is not read: the connection is unusable
            self.reply(413, b"body too large\n", "text/plain; charset=utf-8")
            return
        body = self.rfile.read(length)
        if path == "/convert":
            self.convert(body)
            return
        try:
            review = json.loads(body)
            request = review["request"]
            if not isinstance(request, dict) or not isinstance(request.get("uid"), str) \
                    or not request["uid"]:
                raise ValueError("request.uid missing")
            response = admission_response(request)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            self.reply(400, f"not an AdmissionReview: {e}\n".encode(),
                       "text/plain; charset=utf-8")
            return
        if LOG_REVIEWS:
            log(f"review {request['uid']}: {request.get('operation')} "
                f"{(request.get('resource') or {}).get('resource')} "
                f"{request.get('namespace', '')}/{request.get('name', '')}: "
                f"{'allowed' if response.get('allowed') else 'denied'}")
        answer = {"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
                  "kind": "AdmissionReview", "response": response}
        self.reply(200, json.dumps(answer).encode(), "application/json")

    def convert(self, body):
        try:
            review = json.loads(body)
            request = review["request"]
            desired = request["desiredAPIVersion"]
            objects = [dict(obj, apiVersion=desired) for obj in request["objects"]]
            uid = request["uid"]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            self.reply(400, f"not a ConversionReview: {e}\n".encode(),
                       "text/plain; charset=utf-8")
            return
        if LOG_REVIEWS:
            log(f"conversion {uid}: {len(objects)} object(s) to {desired}")
        answer = {"apiVersion": review.get("apiVersion", "apiextensions.k8s.io/v1"),
                  "kind": "ConversionReview",
                  "response": {"uid": uid, "convertedObjects": objects,
                               "result": {"status": "Success"}}}
        self.reply(200, json.dumps(answer).encode(), "application/json")

    def reply(self, code, body, content_type):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass  # no access log: the reload lines are what this example is about


class WebhookServer(ThreadingHTTPServer):
    daemon_threads = True  # open connections do not hold up the exit

    def __init__(self, address, reloader):
        self.reloader = reloader
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, Handler)

    def get_request(self):
        sock, address = self.socket.accept()
        # The context in service now is this connection's for its whole life. The
        # handshake runs in the connection's own thread (finish_request), so a slow
        # client never holds up the accept loop.
        tls = self.reloader.context.wrap_socket(sock, server_side=True,
                                                do_handshake_on_connect=False)
        return tls, address

    def finish_request(self, request, client_address):
        request.settimeout(HANDSHAKE_TIMEOUT)
        try:
            request.do_handshake()
        except OSError as e:  # ssl.SSLError included: a client that does not trust us
            log(f"TLS handshake with {client_address[0]} failed: {e}")
            return
        super().finish_request(request, client_address)

    def shutdown_request(self, request):
        # End the TLS session properly (close_notify) before closing: clients such as
        # OpenSSL 3 treat a bare close as a truncated stream.
        try:
            request.settimeout(1.0)
            request.unwrap()
        except (OSError, ValueError):
            pass  # the peer is gone already, or the handshake never completed
        super().shutdown_request(request)


# --- main ---------------------------------------------------------------------------------

def parse_listen(value):
    """HOST:PORT or [IPv6]:PORT."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cert-dir", required=True,
                        help="folder with tls.crt and tls.key (certctl run --cert-dir)")
    parser.add_argument("--listen", required=True, type=parse_listen, metavar="HOST:PORT",
                        help="address to serve HTTPS on; port 0 picks a free one")
    parser.add_argument("--ready-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long to wait for a pair before giving up (default 60)")
    parser.add_argument("--log-reviews", action="store_true",
                        help="log a line for every AdmissionReview answered")
    args = parser.parse_args(argv)
    global LOG_REVIEWS
    LOG_REVIEWS = args.log_reviews

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    # Serve nothing until the folder holds a pair: a listener without a certificate would
    # only fail the API server's handshakes.
    reloader = Reloader(args.cert_dir)
    deadline = time.monotonic() + args.ready_timeout
    while not reloader.poll():
        if stop.is_set():
            return 0
        if time.monotonic() >= deadline:
            reason = f": {reloader.last_error[1]}" if reloader.last_error else ""
            log(f"no certificate pair in {args.cert_dir} after {args.ready_timeout:g}s{reason}")
            return 1
        stop.wait(POLL_INTERVAL)

    try:
        server = WebhookServer(args.listen, reloader)
    except OSError as e:
        log(f"cannot listen on {args.listen[0]}:{args.listen[1]}: {e}")
        return 2
    threading.Thread(target=reloader.run, args=(stop,), name="reloader", daemon=True).start()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                     name="accept", daemon=True).start()
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"LISTENING https://{shown}:{port}", flush=True)
    log(f"serving https://{shown}:{port} from {args.cert_dir}")

    while not stop.wait(1.0):
        pass
    log("stopping")
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
