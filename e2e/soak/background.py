"""A loop on a thread of its own, for the parts of the soak that act while the cluster lives:
the API server's calls and its cache (apiserver.py), the kubelet and the EndpointSlice writer
(workloads.py)."""

import threading
import time

__all__ = ["Background"]


class Background:
    """Calls `step()` every `interval` seconds (start to start) on a daemon thread, from
    start() until stop(). With `errors` (a list), what a step raises is appended there as
    `what` + `Type: message` and the loop goes on (the report lists them); without, it ends
    the thread."""

    def __init__(self, name, interval, errors=None, what=""):
        self.interval = interval
        self._errors, self._what = errors, what
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def step(self):
        raise NotImplementedError

    def _run(self):
        while not self._stop.is_set():
            started = time.monotonic()
            if self._errors is None:
                self.step()
            else:
                try:
                    self.step()
                except Exception as e:  # noqa: BLE001 - a harness bug must show in the report
                    self._errors.append(f"{self._what}{type(e).__name__}: {e}")
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def start(self):
        self._thread.start()
        return self

    def stop(self, timeout=30):
        self._stop.set()
        self._thread.join(timeout)
