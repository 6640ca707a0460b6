"""The C++ kube client (config, curl transport, REST client, ListWatch) over a live
connection: resuming a dropped watch, re-listing after 410 Gone, riding out 503s."""

import os
import subprocess
import time

import pytest


NS = "default"


@pytest.fixture
def probe_binary(certctl_binary):
    path = os.path.join(os.path.dirname(certctl_binary), "kube_probe")
    if not os.path.isfile(path):
        pytest.fail(f"kube_probe not built beside {certctl_binary}")
    return path


def create_secret(cluster, name):
    cluster.kubectl("create", "secret", "generic", name, "-n", NS, "--from-literal=k=v")


def start_probe(cluster, probe_binary, expect, *flags):
    return subprocess.Popen([probe_binary, "--kubeconfig", cluster.kubeconfig(), "-n", NS,
                             "--expect", ",".join(expect), "--timeout", "30", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc, prefix, lines, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith(prefix):
            return
    raise AssertionError(f"no {prefix!r} line; saw {lines}")


def test_watch_resumes_after_drop_and_relists_after_410(cluster, probe_binary):
    create_secret(cluster, "s1")
    proc = start_probe(cluster, probe_binary, ["s1", "s2", "s3", "s4"])
    lines = []
    try:
        wait_for_line(proc, "LIST", lines)
        assert lines[-1].endswith(" s1")

        create_secret(cluster, "s2")
        wait_for_line(proc, "ADDED s2", lines)
        cluster.drop_watches()
        wait_for_line(proc, "RESUME", lines)

        create_secret(cluster, "s3")
        wait_for_line(proc, "ADDED s3", lines)
        # While the client is held off with a 503 + Retry-After, s4 appears and the history
        # is compacted: resuming from the old revision then gets 410, so it lists again.
        cluster.inject_fault(method="GET", path="/secrets$", watch=True, status=503, count=1,
                             retry_after=2)
        cluster.drop_watches(abrupt=True)
        create_secret(cluster, "s4")
        cluster.compact()
        out, err = proc.communicate(timeout=20)
        lines += out.split("\n")
    finally:
        proc.kill()
    assert proc.returncode == 0, (lines, err)
    assert "RELIST" in lines
    relist = [line for line in lines if line.startswith("LIST ")][-1]
    assert set(relist.split()[2].split(",")) >= {"s1", "s2", "s3"}
    assert lines[-2:] == ["DONE", ""] or lines[-1] == "DONE"


def test_watch_rides_out_unavailable_api(cluster, probe_binary):
    create_secret(cluster, "s1")
    cluster.inject_fault(method="GET", path="/secrets$", status=503, count=3, watch=False)
    proc = start_probe(cluster, probe_binary, ["s1", "s2"])
    lines = []
    try:
        wait_for_line(proc, "LIST", lines)
        create_secret(cluster, "s2")
        out, err = proc.communicate(timeout=20)
        lines += out.split("\n")
    finally:
        proc.kill()
    assert proc.returncode == 0, (lines, err)
    # The list was answered 503 (no Retry-After) three times; the client backed off, retried
    # and went on to watch.
    codes = [e["code"] for e in cluster.request_log()["requests"]
             if e["resource"] == "secrets" and e["verb"] == "list"]
    assert codes[:4] == [503, 503, 503, 200], codes


@pytest.mark.backends("real")
def test_a_long_list_is_handed_over_a_page_at_a_time(cluster, probe_binary):
    """What certctl controller lists (every Service of a cluster) comes a page at a time,
    never all at once, and the watch starts from the list's resourceVersion."""
    names = [f"p{i}" for i in range(7)]
    for name in names:
        create_secret(cluster, name)
    proc = start_probe(cluster, probe_binary, [*names, "after"], "--page-size", "3")
    lines = []
    try:
        wait_for_line(proc, "LIST", lines)
        create_secret(cluster, "after")
        out, err = proc.communicate(timeout=20)
        lines += out.split("\n")
    finally:
        proc.kill()
    assert proc.returncode == 0, (lines, err)
    pages = [line for line in lines if line.startswith("PAGE ")]
    assert all(int(page.split()[1]) <= 3 for page in pages), pages
    listed = [line for line in lines if line.startswith("LIST ")][0].split()
    assert set(names) <= set(listed[2].split(",")), listed
    assert any(line.startswith("ADDED after") for line in lines), lines
