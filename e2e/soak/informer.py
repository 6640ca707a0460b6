"""Informer: the latest version of every object of one collection, kept by list and watch the
way the API server's own caches and the controllers' informers keep them, so the soak's
API server, kubelet and kube-proxy read state without polling the emulator.

    deployments = Informer(cluster, "/apis/apps/v1/namespaces/infra/deployments").start()
    deployments.get("hook")            # the object, or None
    deployments.changed.wait(1.0)      # set at every event
"""

import http.client
import threading
import time

__all__ = ["Informer"]

WATCH_SECONDS = 30  # server-side bound of one watch; it is then re-opened from the last version


class Informer:
    """List and watch `path` as admin; `objects` maps name to object. Survives dropped
    watches and 410 Gone (re-list). `on_event(type, obj)` is called on the watch thread."""

    def __init__(self, cluster, path, on_event=None):
        self.cluster, self.path, self.on_event = cluster, path, on_event
        self.objects = {}
        self.changed = threading.Event()
        self.synced = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stream = None
        self._thread = threading.Thread(target=self._run, name=f"informer {path}", daemon=True)

    def start(self, bound=20.0):
        self._thread.start()
        if not self.synced.wait(bound):
            raise RuntimeError(f"informer {self.path}: no list within {bound:g}s")
        return self

    def stop(self):
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        self._thread.join(10)

    def get(self, name):
        with self._lock:
            return self.objects.get(name)

    def items(self):
        with self._lock:
            return list(self.objects.values())

    def _relist(self):
        resp = self.cluster.api("GET", self.path, timeout=10)
        if resp.status != 200:
            raise OSError(f"list {self.path}: {resp.status}")
        body = resp.json()
        with self._lock:
            self.objects = {o["metadata"]["name"]: o for o in body.get("items") or []}
        self.synced.set()
        self.changed.set()
        return body["metadata"]["resourceVersion"]

    def _run(self):
        version = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._relist()
                version = self._watch(version)
            except (OSError, ValueError, KeyError, AttributeError, http.client.HTTPException):
                # AttributeError: http.client reading a stream that stop() closed
                version = None
                self._stop.wait(0.2)

    def _watch(self, version):
        stream = self.cluster.watch(self.path, timeout=WATCH_SECONDS + 10,
                                    resourceVersion=version, allowWatchBookmarks="true",
                                    timeoutSeconds=str(WATCH_SECONDS))
        self._stream = stream
        try:
            if stream.status != 200:
                return None
            for event in stream:
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return None  # 410 Gone: list again
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if kind == "BOOKMARK":
                    continue
                name = obj["metadata"]["name"]
                with self._lock:
                    if kind == "DELETED":
                        self.objects.pop(name, None)
                    else:
                        self.objects[name] = obj
                self.changed.set()
                if self.on_event is not None:
                    self.on_event(kind, obj)
            return version
        finally:
            stream.close()
            self._stream = None

    def wait(self, predicate, what, bound):
        """Blocks until predicate(self) is true (checked at every change), else raises."""
        deadline = time.monotonic() + bound
        while not predicate(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{what}: not within {bound:g}s")
            self.changed.clear()
            if predicate(self):
                return
            self.changed.wait(min(left, 0.5))
