"""What both backends of bench/peers/run.py measure with: admission calls made on a thread
while a step runs (`Caller`), a process's CPU time, and waiting for a condition."""

import collections
import json
import os
import re
import threading
import time

POLL = 0.05          # seconds between two admission calls
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a live process, in seconds (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def failure_cause(answer):
    """The part of kube-apiserver's answer that says why a webhook call failed."""
    try:
        message = json.loads(answer).get("message", answer)
    except ValueError:
        message = answer
    return re.sub(r"\s+", " ", message.split(": ", 1)[-1])[:160]


class Caller:
    """Admission calls (`bed.admit()`) every POLL seconds on a thread while a step runs,
    counting the failed ones: what the cluster's users meet while the tool does its work."""

    def __init__(self, bed):
        self.bed = bed
        self.calls = self.failed = 0
        self.answers = collections.Counter()  # kube-apiserver's words for the failed calls
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="caller", daemon=True)

    def _run(self):
        while not self._stop.is_set():
            ok, answer = self.bed.admit()
            self.calls += 1
            if not ok:
                self.failed += 1
                self.answers[failure_cause(answer)] += 1
            self._stop.wait(POLL)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(35)

    def record(self, figures, prefix):
        figures[f"{prefix}_calls"], figures[f"{prefix}_failed"] = self.calls, self.failed
        figures[f"{prefix}_failures"] = dict(self.answers)


def wait_for(predicate, bound, interval=POLL):
    """Seconds until predicate() holds, or None when it did not within `bound`."""
    start = time.monotonic()
    while time.monotonic() - start < bound:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    return None

