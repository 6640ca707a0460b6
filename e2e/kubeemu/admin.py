"""Test controls: fault injection and the request log (served under /_emulator/)."""

import itertools
import re
import threading

from . import codec, errors

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")

_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
            405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 422: "Invalid",
            429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
            504: "Timeout"}


class Fault:
    def __init__(self, spec, fault_id):
        self.id = fault_id
        self.method = spec.get("method", "*").upper()
        self.path = re.compile(spec.get("path", ".*"))
        self.watch = spec.get("watch")  # None: any request; True/False: only (non-)watches
        # None: any user; a name: only requests authenticated as that user (so a test can
        # fail one client's requests while its own go through).
        self.user = spec.get("user")
        self.status = spec.get("status")  # None: latency only
        self.retry_after = spec.get("retryAfter")
        self.latency = float(spec.get("latency", 0))
        self.remaining = int(spec.get("count", 1))
        # 429 only: "apf" = text/plain body as priority & fairness sends; "status" = Status.
        self.format = spec.get("format", "apf")
        if self.status is not None and self.status not in _REASONS:
            raise ValueError(f"unsupported fault status {self.status}")
        if self.format not in ("apf", "status"):
            raise ValueError(f"unsupported fault format {self.format}")
        if self.user is not None and not isinstance(self.user, str):
            raise ValueError("fault user must be a user name (string)")

    def matches(self, method, path, is_watch, user=None):
        return (self.method in ("*", method) and self.path.search(path) is not None and
                (self.watch is None or self.watch == is_watch) and
                (self.user is None or self.user == user))

    def to_json(self):
        return {"id": self.id, "method": self.method, "path": self.path.pattern,
                "watch": self.watch, "status": self.status, "retryAfter": self.retry_after,
                "latency": self.latency, "count": self.remaining, "format": self.format,
                "user": self.user}

    def error(self, gr, name):
        """The ApiError this fault answers with (gr/name describe the targeted object)."""
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        code = self.status
        if code == 429 and self.format == "apf":
            return errors.ApiError(429, "", "Too many requests, please try again later.",
                                   headers=headers, plain_text=True)
        if code == 429:
            err = errors.ApiError(429, "TooManyRequests",
                                  "Too many requests: injected by the emulator",
                                  {"retryAfterSeconds": self.retry_after})
        elif code == 409:
            err = errors.conflict(gr, name)
        elif code == 410:
            err = errors.gone("The resourceVersion for the provided list is too old.")
        elif code == 500:
            err = errors.internal("injected by the emulator")
        elif code == 503:
            err = errors.ApiError(503, "ServiceUnavailable",
                                  "the server is currently unable to handle the request", {})
        elif code == 504:
            err = errors.timeout("request did not complete within the allowed duration",
                                 retry_after=self.retry_after or 0)
        else:
            err = errors.ApiError(code, _REASONS[code], "injected by the emulator", {})
        err.headers.update(headers)
        return err


class Faults:
    def __init__(self):
        self._lock = threading.Lock()
        self._faults = []
        self._ids = itertools.count(1)

    def add(self, spec):
        fault = Fault(spec, next(self._ids))
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, method, path, is_watch, user=None):
        """The first pending fault matching the request (by `user`, its authenticated
        name), consuming one of its uses."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path, is_watch, user):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def list(self):
        with self._lock:
            return [f.to_json() for f in self._faults]

    def clear(self):
        with self._lock:
            self._faults.clear()


class RequestLog:
    def __init__(self):
        self._lock = threading.Lock()
        self._entries = []

    def append(self, entry):
        entry["time"] = codec.fmt_micro(codec.now())
        with self._lock:
            self._entries.append(entry)

    def reset(self):
        with self._lock:
            self._entries.clear()

    def snapshot(self):
        with self._lock:
            entries = list(self._entries)
        return summarise(entries)


def summarise(entries):
    """The request log as the admin API answers it (the harness's real backend too):
    {"requests": entries, "counts": {verb: {resource.group: n}}, "writes": the successful,
    non-dry-run writes}."""
    counts = {}
    for e in entries:
        resource = e["resource"] + (f".{e['apiGroup']}" if e["apiGroup"] else "")
        by_resource = counts.setdefault(e["verb"], {})
        by_resource[resource] = by_resource.get(resource, 0) + 1
    writes = [e for e in entries
              if e["verb"] in WRITE_VERBS and e["code"] < 300 and not e["dryRun"]]
    return {"requests": entries, "counts": counts, "writes": writes}
