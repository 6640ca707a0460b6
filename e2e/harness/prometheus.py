"""Prometheus for the end-to-end tests: Debian's `promtool` and `prometheus` (the package
`prometheus`, which scripts/setup.sh installs without starting its daemon).

`find_tool(name)` returns the path of one of them; a missing one fails the test, it is never
skipped. `Prometheus` is one server on a free loopback port with a temporary storage folder,
scraping static targets and evaluating rule files every second, read through its HTTP API:

    with Prometheus(workdir, {"infra/hook": [("127.0.0.1:8080", {"pod": "hook-0"})]},
                    [RULES]) as prometheus:
        firing = prometheus.wait_for(lambda: prometheus.alerts(), "an alert")
"""

import json
import os
import shutil
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from .kubelet import ContainerProcess, free_ports
from .waiting import http_status

__all__ = ["Prometheus", "find_tool", "POLL", "STOP_LIMIT"]

POLL = 0.2        # seconds between two looks at the HTTP API
START_BOUND = 30.0
STOP_LIMIT = 5.0  # seconds Prometheus gets to exit after SIGTERM before it is killed


def find_tool(name):
    """Path of Debian's `promtool` or `prometheus`; fails the test when it is missing."""
    path = shutil.which(name) or f"/usr/bin/{name}"
    if not os.access(path, os.X_OK):
        pytest.fail(f"{name} is not installed: scripts/setup.sh installs it with Debian's "
                    f"prometheus package (apt-get install prometheus)")
    return path


class Prometheus:
    """A Prometheus server as a local process. `jobs` maps a job name to its targets,
    (host:port, extra labels) pairs, or `scrape_configs` gives the scrape configuration
    whole; `rule_files` are loaded as they are. Scrapes and rule evaluations happen every
    `interval`. A context manager: started on enter, stopped (SIGTERM, then SIGKILL after
    5 s) on exit."""

    def __init__(self, workdir, jobs=None, rule_files=(), interval="1s", scrape_configs=None):
        self.dir = os.path.join(str(workdir), "prometheus")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = os.path.join(self.dir, "prometheus.yml")
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval,
                       "evaluation_interval": interval},
            "rule_files": [os.path.abspath(path) for path in rule_files],
            "scrape_configs": scrape_configs if scrape_configs is not None else [
                {"job_name": job, "static_configs": [
                    {"targets": [address], "labels": labels} for address, labels in targets]}
                for job, targets in (jobs or {}).items()],
        }
        with open(self.config_path, "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f)
        self.argv = [find_tool("prometheus"), f"--config.file={self.config_path}",
                     f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
        self.process = None

    def start(self, bound=START_BOUND):
        """Starts the server and returns once /-/ready answers 200."""
        self.process = ContainerProcess(self.argv, {}, self.dir, name="prometheus").start()
        self.wait_for(lambda: http_status(self.url + "/-/ready") == 200, "Prometheus ready", bound)
        return self

    def alive(self):
        return self.process is not None and self.process.alive()

    def log(self):
        return self.process.log()

    def api(self, path, **params):
        """The `data` of a successful /api/v1 answer."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=5) as resp:
            doc = json.load(resp)
        assert doc["status"] == "success", doc
        return doc["data"]

    def alerts(self):
        """Every alert, pending or firing: {labels, annotations, state, activeAt, value}."""
        return self.api("alerts")["alerts"]

    def rule_groups(self):
        return self.api("rules")["groups"]

    def query(self, expr):
        return self.api("query", query=expr)["result"]

    def targets(self, state="active"):
        """The active targets (labels after relabeling, health), or the dropped ones."""
        return self.api("targets", state=state)[f"{state}Targets"]

    def wait_for(self, predicate, what, bound=START_BOUND):
        """Polls `predicate` every 0.2 s until it returns a true value, which is returned;
        fails after `bound` seconds, or at once when Prometheus has exited."""
        deadline = time.monotonic() + bound
        while True:
            value = predicate()
            if value:
                return value
            if not self.alive():
                pytest.fail(f"Prometheus exited ({self.process.proc.returncode}) while waiting for "
                            f"{what}:\n{self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {bound:g}s waiting for {what}\n{self.log()}")
            time.sleep(POLL)

    def stop(self):
        """SIGTERM, wait up to STOP_LIMIT seconds, then SIGKILL; returns the exit code."""
        return None if self.process is None else self.process.stop(grace=STOP_LIMIT)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
