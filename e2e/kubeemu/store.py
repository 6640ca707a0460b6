"""In-memory object storage with etcd-like revisions, bounded history and watch fan-out.

One global revision counts every write. Each write appends (rev, type, object, previous
object) to the history; watchers wait on one condition variable and read the history
after their position, so a single notify_all fans every event out. History before
`compacted` is gone: watches and consistent reads older than that get 410.

Callers hold `store.lock` (re-entrant) around read-modify-write sequences so that the
optimistic-concurrency check and the write are atomic.
"""

import bisect
import copy
import threading

HISTORY_LIMIT = 100_000


class Event:
    __slots__ = ("rev", "type", "storage", "obj", "prev")

    def __init__(self, rev, type_, storage, obj, prev):
        self.rev = rev
        self.type = type_
        self.storage = storage
        self.obj = obj
        self.prev = prev


class Compacted(Exception):
    """The requested revision is older than the retained history."""

    def __init__(self, requested, compacted):
        super().__init__(f"too old resource version: {requested} ({compacted})")
        self.requested = requested
        self.compacted = compacted


class Store:
    def __init__(self):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.rev = 0
        self.compacted = 0
        self._objects = {}  # storage key -> {(namespace, name): object}
        self._history = []
        self._revs = []
        # Bumped to end every open watch (admin "drop watches"); closed on shutdown.
        self.watch_epoch = 0
        self.closed = False

    # --- reads ----------------------------------------------------------------------------

    def get(self, storage, namespace, name):
        with self.lock:
            obj = self._objects.get(storage, {}).get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, storage, namespace=None, at_rev=None):
        """(revision, objects sorted by namespace/name); at_rev reconstructs an older state."""
        with self.lock:
            objs = dict(self._objects.get(storage, {}))
            rev = self.rev
            if at_rev is not None and at_rev < self.rev:
                if at_rev < self.compacted:
                    raise Compacted(at_rev, self.compacted)
                for ev in reversed(self._history[bisect.bisect_right(self._revs, at_rev):]):
                    if ev.storage != storage:
                        continue
                    key = (ev.obj["metadata"].get("namespace", ""), ev.obj["metadata"]["name"])
                    if ev.prev is None:
                        objs.pop(key, None)
                    else:
                        objs[key] = ev.prev
                rev = at_rev
            items = [copy.deepcopy(o) for k, o in sorted(objs.items())
                     if namespace is None or k[0] == namespace]
            return rev, items

    def namespaced_keys(self, namespace):
        """[(storage, name)] of every object stored in a namespace."""
        with self.lock:
            return [(s, k[1]) for s, objs in self._objects.items() for k in objs
                    if k[0] == namespace]

    # --- writes ---------------------------------------------------------------------------

    def write(self, storage, obj, type_):
        """Store (ADDED/MODIFIED) or remove (DELETED) an object; returns the stored copy.

        Bumps the revision and stamps it into metadata.resourceVersion.
        """
        with self.cond:
            self.rev += 1
            obj = copy.deepcopy(obj)
            meta = obj["metadata"]
            meta["resourceVersion"] = str(self.rev)
            key = (meta.get("namespace", ""), meta["name"])
            bucket = self._objects.setdefault(storage, {})
            prev = bucket.get(key)
            if type_ == "DELETED":
                bucket.pop(key, None)
            else:
                bucket[key] = obj
            self._history.append(Event(self.rev, type_, storage, obj, prev))
            self._revs.append(self.rev)
            if len(self._history) > HISTORY_LIMIT:
                drop = len(self._history) - HISTORY_LIMIT
                self.compacted = self._revs[drop - 1]
                del self._history[:drop]
                del self._revs[:drop]
            self.cond.notify_all()
            return copy.deepcopy(obj)

    def compact(self):
        """Forget all history: later watches or consistent reads from an older rev get 410."""
        with self.cond:
            self.compacted = self.rev
            self._history.clear()
            self._revs.clear()
            self.cond.notify_all()
            return self.compacted

    def drop_watches(self):
        with self.cond:
            self.watch_epoch += 1
            self.cond.notify_all()

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    # --- watch ----------------------------------------------------------------------------

    def events_after(self, storage, rev):
        """History events for a storage key with revision > rev (caller holds the lock)."""
        if rev < self.compacted:
            raise Compacted(rev, self.compacted)
        start = bisect.bisect_right(self._revs, rev)
        return [e for e in self._history[start:] if e.storage == storage]
