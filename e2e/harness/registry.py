"""An OCI registry for the end-to-end tests: Debian's `docker-registry` (the package
docker-registry, the CNCF distribution registry) on a free loopback port, plain HTTP, no
authentication, its storage in a temporary folder:

    with Registry(workdir) as registry:
        registry.host          # "127.0.0.1:PORT", to push and pull with
        registry.status("/v2/")

A missing executable fails the test, it is never skipped.
"""

import os
import secrets
import shutil
import time

import pytest
import yaml

from .kubelet import ContainerProcess, free_ports
from .waiting import http_status

__all__ = ["Registry", "find_registry", "POLL", "STOP_LIMIT"]

POLL = 0.1        # seconds between two looks at /v2/ while it starts
START_BOUND = 30.0
STOP_LIMIT = 5.0  # seconds the registry gets to exit after SIGTERM before it is killed


def find_registry():
    """Path of Debian's `docker-registry`; fails the test when it is missing."""
    path = shutil.which("docker-registry") or "/usr/bin/docker-registry"
    if not os.access(path, os.X_OK):
        pytest.fail("docker-registry is not installed: the registry tests need Debian's "
                    "docker-registry package (apt-get install docker-registry)")
    return path


class Registry:
    """One registry process on 127.0.0.1 with storage under `workdir`. A context manager:
    started on enter (once /v2/ answers), stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, workdir):
        self.dir = os.path.join(str(workdir), "registry")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_ports(1)[0]
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"
        self.config_path = os.path.join(self.dir, "config.yml")
        config = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": os.path.join(self.dir, "data")},
                        "delete": {"enabled": True}},
            # No TLS, no auth: loopback only, for one test. With a drain timeout the
            # registry handles SIGTERM itself: it stops serving and exits 0.
            "http": {"addr": self.host, "secret": secrets.token_hex(16),
                     "draintimeout": "2s"},
        }
        with open(self.config_path, "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f)
        self.argv = [find_registry(), "serve", self.config_path]
        self.process = None

    def start(self, bound=START_BOUND):
        """Starts the registry and returns once GET /v2/ answers 200."""
        self.process = ContainerProcess(self.argv, {}, self.dir, name="registry").start()
        deadline = time.monotonic() + bound
        while self.status("/v2/") != 200:
            if not self.alive():
                pytest.fail(f"docker-registry exited ({self.process.proc.returncode}) while "
                            f"starting:\n{self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"docker-registry did not answer /v2/ within {bound:g}s\n{self.log()}")
            time.sleep(POLL)
        return self

    def alive(self):
        return self.process is not None and self.process.alive()

    def log(self):
        return self.process.log()

    def status(self, path):
        """The HTTP status of GET `path`, or None when nothing answers."""
        return http_status(self.url + path)

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
