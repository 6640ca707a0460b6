"""HTTPS front end: TLS, authentication, routing, authorization, faults, logging.

Each connection is served on its own thread (ThreadingHTTPServer); the TLS handshake
happens on that thread, so a slow client never blocks accept(). Responses are always
application/json (one document plus newline), watches are chunked streams.
"""

import http.server
import json
import secrets
import socket
import ssl
import sys
import time
import traceback
import urllib.parse
import uuid

from . import codec, discovery, errors, resources
from .admin import Faults, RequestLog
from .api import API, Request, parse_bool
from .selectors import FieldSelector

MAX_BODY = 3 * 1024 * 1024
ANONYMOUS_PATHS = ("/version", "/version/", "/healthz", "/livez", "/readyz")
DISCOVERY_PREFIXES = ("/api", "/apis", "/openapi", "/version")


class Route:
    """A parsed resource path."""

    def __init__(self, res, namespace="", name="", subresource=""):
        self.res = res
        self.namespace = namespace
        self.name = name
        self.subresource = subresource


def parse_resource_path(path):
    """Route for /api/v1/... or /apis/<g>/<v>/...; None when it is not a resource path."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api" and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        res = resources.lookup(group, version, rest[2])
        if res is not None and res.namespaced:
            namespace, rest = rest[1], rest[2:]
    res = resources.lookup(group, version, rest[0])
    if res is None or len(rest) > 3:
        raise errors.not_found_path()
    if res.namespaced and not namespace and len(rest) > 1:
        raise errors.not_found_path()  # named namespaced objects need their namespace
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and not ((sub == "status" and res.status) or (sub == "scale" and res.scale)):
        raise errors.not_found_path()
    return Route(res, namespace, name, sub)


def verb_for(method, route, query):
    watch = query.get("watch", ["false"])[0]
    if method == "GET":
        if route.name:
            return "get"
        return "watch" if parse_bool(watch, "watch") else "list"
    if method == "POST" and not route.name:
        return "create"
    if method == "PUT" and route.name:
        return "update"
    if method == "PATCH" and route.name:
        return "patch"
    if method == "DELETE":
        return "delete" if route.name else "deletecollection"
    raise errors.method_not_allowed()


class Emulator:
    """Everything one emulator instance holds; the handler class reaches it via the server."""

    def __init__(self, store, authenticator, admin_token, bookmark_interval):
        self.store = store
        self.auth = authenticator
        self.admin_token = admin_token
        self.api = API(store, authenticator, bookmark_interval)
        self.faults = Faults()
        self.log = RequestLog()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubeemu"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        pass  # the request log replaces access logging

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = lambda self: self._dispatch()

    # --- plumbing -------------------------------------------------------------------------

    @property
    def emu(self):
        return self.server.emulator

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return body
                if len(body) + size > MAX_BODY:
                    raise errors.ApiError(413, "RequestEntityTooLarge",
                                          f"Request entity too large: limit is {MAX_BODY}")
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise errors.ApiError(413, "RequestEntityTooLarge",
                                  f"Request entity too large: limit is {MAX_BODY}")
        return self.rfile.read(length) if length else b""

    def _send(self, code, body, content_type="application/json", headers=None):
        data = body if isinstance(body, bytes) else (codec.dumps(body) + "\n").encode("utf-8")
        self._log(code)
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            if isinstance(v, list):
                for item in v:
                    self.send_header(k, item)
            else:
                self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _log(self, code):
        """Logs the request before its answer leaves, as the apiserver's audit log records a
        response before the client reads it: whoever has the answer finds the entry."""
        if self._entry is not None:
            self._entry["code"] = code
            self.emu.log.append(self._entry)
            self._entry = None

    def _send_error(self, err):
        if err.plain_text:
            self._send(err.code, (err.message + "\n").encode(), "text/plain; charset=utf-8",
                       {"X-Content-Type-Options": "nosniff", **err.headers})
        else:
            self._send(err.code, err.status(), headers=err.headers)

    def _accepts_json(self):
        accept = self.headers.get("Accept") or "*/*"
        for part in accept.split(","):
            media = part.split(";")[0].strip().lower()
            if media in ("application/json", "*/*", "application/*", ""):
                return True
        return False

    # --- dispatch -------------------------------------------------------------------------

    def _dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        self._entry = entry = {"user": "", "verb": self.command.lower(), "method": self.command,
                 "path": path, "query": url.query, "apiGroup": "", "resource": "",
                 "subresource": "", "namespace": "", "name": "",
                 "userAgent": self.headers.get("User-Agent", ""),
                 "dryRun": bool(query.get("dryRun")), "code": 0}
        try:
            body = self._read_body()
            if path in ANONYMOUS_PATHS:
                entry["code"] = self._anonymous(path)
                return
            user = self.emu.auth.authenticate(self.headers.get("Authorization"))
            if user is None:
                raise errors.unauthorized()
            entry["user"] = user.name
            if path.startswith("/_emulator/"):
                self._entry = None  # test controls are not part of the request log
                if not user.admin:
                    raise errors.forbidden(resources.GroupResource("", ""), "",
                                           f'User "{user.name}" cannot access the emulator '
                                           f'controls')
                self._admin(path, body)
                return
            if not self._accepts_json() and path != "/openapi/v2":
                raise errors.not_acceptable("only the following media types are accepted: "
                                            "application/json")
            route = parse_resource_path(path)
            if route is None:
                entry["code"] = self._non_resource(path)
                return
            verb = verb_for(self.command, route, query)
            res = route.res
            entry.update(verb=verb, apiGroup=res.group, resource=res.resource,
                         subresource=route.subresource, namespace=route.namespace,
                         name=route.name)
            code = self._resource(user, route, verb, query, body)
            if code:  # None for watches, which log themselves when the stream starts
                entry["code"] = code
        except errors.ApiError as err:
            entry["code"] = err.code
            self._send_error(err)
        except (ConnectionError, ssl.SSLError, socket.timeout):
            self.close_connection = True
        except Exception as e:  # a bug in the emulator: answer 500, keep serving
            traceback.print_exc(file=sys.stderr)
            err = errors.internal(f"kubeemu: {type(e).__name__}: {e}")
            entry["code"] = 500
            try:
                self._send_error(err)
            except OSError:
                self.close_connection = True
        finally:
            if self._entry is not None and self._entry["code"]:
                self._log(self._entry["code"])

    def _anonymous(self, path):
        if path.startswith("/version"):
            self._send(200, discovery.VERSION)
        else:
            self._send(200, b"ok", "text/plain; charset=utf-8")
        return 200

    def _non_resource(self, path):
        """Discovery and OpenAPI; every authenticated user may read them (system:discovery)."""
        if self.command != "GET":
            raise errors.method_not_allowed()
        host = f"127.0.0.1:{self.server.server_address[1]}"
        parts = [p for p in path.split("/") if p]
        doc = None
        if parts == ["api"]:
            doc = discovery.api_versions(host)
        elif parts == ["api", "v1"]:
            doc = discovery.api_resource_list("", "v1")
        elif parts == ["apis"]:
            doc = discovery.api_group_list()
        elif len(parts) == 2 and parts[0] == "apis":
            doc = discovery.api_group(parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = discovery.api_resource_list(parts[1], parts[2])
        elif parts == ["openapi", "v2"]:
            self._send(200, b"", discovery.OPENAPI_V2_CONTENT_TYPE)
            return 200
        if doc is None:
            raise errors.not_found_path()
        self._send(200, doc)
        return 200

    def _resource(self, user, route, verb, query, body):
        res = route.res
        name = route.name
        if verb in ("list", "watch") and not name:
            # As the apiserver's RequestInfo does: a list/watch pinned to one name by
            # fieldSelector=metadata.name=X is authorized as a request for X.
            name = FieldSelector.parse(query.get("fieldSelector", [""])[0], res).exact_name()
        fault = self.emu.faults.take(self.command, self.path.split("?")[0], verb == "watch",
                                     user.name)
        if fault is not None:
            if fault.latency:
                time.sleep(fault.latency)  # injected latency, bounded by the fault itself
            if fault.status is not None:
                if fault.status == 410 and verb == "watch":
                    rv = query.get("resourceVersion", ["0"])[0]
                    return self._stream_error(errors.gone(
                        f"too old resource version: {rv} ({self.emu.store.rev})"))
                raise fault.error(res.gr, route.name)
        if res.resource != "selfsubjectaccessreviews" and not self.emu.auth.authorize(
                user, verb, res.group, res.resource, route.subresource, route.namespace, name):
            resource = res.resource + (f"/{route.subresource}" if route.subresource else "")
            where = (f'in the namespace "{route.namespace}"' if route.namespace
                     else "at the cluster scope")
            raise errors.forbidden(res.gr, name, f'User "{user.name}" cannot {verb} resource '
                                                 f'"{resource}" in API group "{res.group}" '
                                                 f'{where}')
        req = Request(self.command, query, self.headers, body, user, res, route.namespace,
                      route.name, route.subresource)
        api = self.emu.api
        if verb == "watch":
            return self._stream(api.watch(req))  # logged when the stream starts
        handler = {"get": api.get, "list": api.list, "create": api.create,
                   "update": api.update, "patch": api.patch, "delete": api.delete,
                   "deletecollection": api.delete_collection}[verb]
        reply = handler(req)
        headers = {}
        if reply.warnings:
            headers["Warning"] = [f'299 - {json.dumps(w)}' for w in reply.warnings]
        self._send(reply.code, reply.body, headers=headers)
        return reply.code

    # --- watch streaming ------------------------------------------------------------------

    def _emit(self, event):
        data = (codec.dumps(event) + "\n").encode("utf-8")
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            return True
        except OSError:
            return False

    def _finish_stream(self, outcome):
        if outcome == "abort":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _start_stream(self):
        self._log(200)  # when the watch starts, not when it ends minutes later
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.flush()

    def _stream(self, stream):
        self._start_stream()
        self._finish_stream(stream.run(self._emit))

    def _stream_error(self, err):
        """A watch that fails after the 200: one ERROR event, then a clean end."""
        self._start_stream()
        self._emit({"type": "ERROR", "object": err.status()})
        self._finish_stream("end")

    # --- admin controls -------------------------------------------------------------------

    def _admin(self, path, body):
        emu = self.emu
        try:
            doc = json.loads(body) if body.strip() else {}
        except ValueError as e:
            raise errors.bad_request(f"invalid JSON: {e}") from None
        route = (self.command, path.rstrip("/"))
        if route == ("GET", "/_emulator/requests"):
            return self._send(200, emu.log.snapshot())
        if route == ("DELETE", "/_emulator/requests"):
            emu.log.reset()
            return self._send(200, {})
        if route == ("POST", "/_emulator/faults"):
            try:
                fault = emu.faults.add(doc)
            except (ValueError, TypeError) as e:
                raise errors.bad_request(str(e)) from None
            return self._send(201, fault.to_json())
        if route == ("GET", "/_emulator/faults"):
            return self._send(200, {"faults": emu.faults.list()})
        if route == ("DELETE", "/_emulator/faults"):
            emu.faults.clear()
            return self._send(200, {})
        if route == ("POST", "/_emulator/watches/drop"):
            emu.api.abrupt_drop = bool(doc.get("abrupt", False))
            emu.store.drop_watches()
            return self._send(200, {})
        if route == ("POST", "/_emulator/compact"):
            return self._send(200, {"compactedRevision": emu.store.compact()})
        if route == ("GET", "/_emulator/policy"):
            return self._send(200, emu.auth.policy())
        if route == ("PUT", "/_emulator/policy"):
            emu.auth.set_policy(doc)
            return self._send(200, emu.auth.policy())
        if route == ("POST", "/_emulator/users"):
            token = doc.get("token") or secrets.token_hex(16)
            emu.auth.add_user(token, doc["name"], doc.get("groups", []), doc.get("rules", []))
            return self._send(201, {"name": doc["name"], "token": token})
        if route == ("GET", "/_emulator/state"):
            return self._send(200, {"resourceVersion": str(emu.store.rev),
                                    "compactedRevision": emu.store.compacted})
        raise errors.not_found_path()


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, emulator, ssl_context):
        self.emulator = emulator
        self.ssl_context = ssl_context
        super().__init__(("127.0.0.1", 0), Handler)

    def finish_request(self, request, client_address):
        """TLS handshake on the connection's own thread, then HTTP."""
        request.settimeout(30)
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
        # algorithm and the client's delayed ACK add ~40 ms to every response.
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            conn = self.ssl_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        conn.settimeout(None)
        try:
            self.RequestHandlerClass(conn, client_address, self)
        except (ConnectionError, ssl.SSLError, socket.timeout):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass


def make_ssl_context(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
