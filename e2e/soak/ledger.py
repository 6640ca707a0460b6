"""The soak's books: every admission call, attributed to the events under way when it was
made; what each event declared it may break, and why; when each event was repaired.

An event is under way from its start until the cluster is steady again after it (every
target trusts exactly the Secret's CA, the Secret's certificate names every host the targets
call, every pod that should run is ready and serves the Secret's certificate). A failed call is declared when an event under way allows its cause;
any other failed call fails the run.
"""

import threading
import time

__all__ = ["Event", "Ledger"]


class Event:
    def __init__(self, name, what, allowed=None):
        self.name, self.what = name, what
        self.allowed = dict(allowed or {})   # cause -> reason
        self.started = None
        self.done = None                     # the disturbance is over (the action returned)
        self.visible = None                  # ... and the API server's calls see that it is
        self.repaired = None                 # steady again after done
        self.calls = 0
        self.failures = []                   # (Call, declared)
        self.writes = []                     # certctl's writes in [started, repaired]
        self.write_budget = None             # (write, most allowed, why), if any
        self.violations = []                 # what else failed the run in this event
        self.notes = []

    @property
    def undeclared(self):
        return [call for call, declared in self.failures if not declared]

    def repair_seconds(self):
        if self.visible is None or self.repaired is None:
            return None
        return max(0.0, self.repaired - self.visible)


class Ledger:
    def __init__(self, clock=time.monotonic, visible_after=0.0):
        """visible_after: how late a change reaches the API server's calls (its cache). The
        disturbance's last change, made as it ended, reaches them that much later; until
        then the cluster cannot be judged repaired."""
        self.clock, self.visible_after = clock, visible_after
        self.started = clock()
        self.events = []
        self.active = []
        self.calls = 0
        self.failures = []            # (Call, [event names], declared)
        self.run_violations = []      # what failed the run outside any one event
        self._lock = threading.Lock()

    def at(self, monotonic):
        return monotonic - self.started

    def begin(self, event):
        with self._lock:
            event.started = self.clock()
            self.events.append(event)
            self.active.append(event)
        return event

    def finish(self, event):
        """The disturbance is over; the event stays under way until steady."""
        with self._lock:
            event.done = self.clock()
            event.visible = event.done + self.visible_after

    def success(self, target):
        with self._lock:
            self.calls += 1
            for event in self.active:
                event.calls += 1

    def failure(self, call):
        """Counts against every event under way at some time between the call's start and
        its answer (`call.until`): one repaired while the call was on its way still counts
        it, and so does one that began before the answer of a call the API server made
        somewhere in between."""
        with self._lock:
            until = getattr(call, "until", call.at)
            under_way = [e for e in self.events
                         if e.started <= until and (e.repaired is None or call.at <= e.repaired)]
            declared = any(call.cause in e.allowed for e in under_way)
            for event in under_way:
                event.calls += 1
                event.failures.append((call, declared))
            self.failures.append((call, [e.name for e in under_way], declared))

    def set_steady(self, steady):
        """Called by the steadiness monitor at every look."""
        with self._lock:
            now = self.clock()
            if not steady:
                return
            for event in list(self.active):
                if event.visible is not None and now >= event.visible:
                    event.repaired = now
                    self.active.remove(event)

    def undeclared(self):
        return [(call, names) for call, names, declared in self.failures if not declared]

    def violations(self):
        return [(event.name, text) for event in self.events for text in event.violations] + \
            [("the run", text) for text in self.run_violations]
