"""Event-driven waits for the end-to-end tests: poll a condition tightly, under a bound."""

import time
import urllib.error
import urllib.request

import pytest

__all__ = ["wait_for", "http_status", "POLL", "BOUND"]

POLL = 0.05    # seconds between two looks
BOUND = 20.0   # overall bound of a wait (a loaded 2-core machine)


def _details(process):
    """What a process has to say: describe() where it has one (certctl run: exit code, log,
    /readyz), else its log()."""
    return process.describe() if hasattr(process, "describe") else process.log()


def wait_for(predicate, what, bound=BOUND, watch=(), poll=POLL):
    """Polls `predicate` until it returns a true value, which is returned. Fails the test
    after `bound` seconds, or at once when one of the processes in `watch` (objects with
    alive() and log()) has exited, with what they have to say."""
    deadline = time.monotonic() + bound
    while True:
        value = predicate()
        if value:
            return value
        for process in watch:
            if not process.alive():
                pytest.fail(f"{type(process).__name__} exited while waiting for {what}\n"
                            f"{_details(process)}")
        if time.monotonic() > deadline:
            details = "\n".join(_details(p) for p in watch)
            pytest.fail(f"timed out after {bound:g}s waiting for {what}\n{details}")
        time.sleep(poll)


def http_status(url, timeout=5):
    """The HTTP status of GET `url` (an error status included, such as a registry's 401), or
    None when nothing answers: what a wait for a local daemon's readiness polls."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None
