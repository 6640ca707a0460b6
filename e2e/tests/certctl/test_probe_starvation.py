"""Probes of `certctl run`'s health port while other clients try to starve it: 2 slowloris
clients (one header line every 3 s), 50 slow clients (one byte every 0.5 s) and 1,000 idle
connections, all from 127.0.0.1 and opened again whenever the server closes them
(harness/starvation.py). The kubelet's probes, from 127.0.0.2, must still be answered 200
within its default 1 s timeout, and the process must stay up and healthy.

Only answers are asserted: a probe gets its 200 within the kubelet's timeout or it fails, as
it would in a pod.
"""

import json
import time

import pytest

from harness.certctl import webhook_configuration
from harness.rbac import emulator_rules
from harness.sidecar import Sidecar, stop_all
from harness.starvation import PROBER, Attack, AttackProcess, probe, raise_fd_limit
from harness.waiting import wait_for

NS = "infra"
SECRET = "webhook-server-cert"
USER = "system:serviceaccount:infra:certctl"
RULES = emulator_rules("sidecar", SECRET, NS, {"validatingWebhooks": ["hook"]})

SLOWLORIS, SLOW, IDLE = 2, 50, 1000
ATTACK_SECONDS = 8.0
PROBE_GAP = 0.2


@pytest.fixture
def ready_sidecar(cluster, certctl_binary, tmp_path):
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user(USER, RULES)
    cluster.kubectl("apply", "-f", "-",
                    input=json.dumps(webhook_configuration("ValidatingWebhookConfiguration",
                                                           "hook", ["a.hook.io"])))
    sidecar = Sidecar(certctl_binary, cluster, str(tmp_path), "a", USER,
                      ["--validating-webhook", "hook"]).start()
    try:
        wait_for(lambda: sidecar.readyz()[0] == 200, "/readyz 200", watch=[sidecar])
        yield sidecar
    finally:
        stop_all([sidecar])


def probe_while_attacked(sidecar, gap):
    """[(path, status, body)] of /healthz and /readyz probes, a pair every `gap` seconds for
    ATTACK_SECONDS; the process must stay up throughout."""
    answers = []
    deadline = time.monotonic() + ATTACK_SECONDS
    while time.monotonic() < deadline:
        for path in ("/healthz", "/readyz"):
            status, body, _ = probe(sidecar.health_port, path)
            answers.append((path, status, body))
        assert sidecar.alive(), sidecar.describe()
        time.sleep(gap)
    return answers


@pytest.mark.time_limit(90)
def test_probes_are_answered_while_clients_starve_the_health_port(ready_sidecar):
    assert raise_fd_limit() >= SLOWLORIS + SLOW + IDLE + 100, "the test needs more descriptors"
    port = ready_sidecar.health_port
    with Attack(port, slowloris=SLOWLORIS, slow=SLOW, idle=IDLE) as attack:
        answers = probe_while_attacked(ready_sidecar, PROBE_GAP)
        reopened = attack.reopened
    failed = [a for a in answers if a[1] != 200]
    assert not failed, (f"{len(failed)} of {len(answers)} probes failed: {failed[:5]}\n"
                        f"{ready_sidecar.describe()}")
    assert len(answers) >= 8
    # The server closed hostile connections (at the per-peer cap, at the deadline) and the
    # attack came back each time: the probes were answered under a sustained attack.
    assert reopened > 0
    assert ready_sidecar.alive(), ready_sidecar.describe()
    assert probe(port, "/healthz")[0] == 200
    assert ready_sidecar.readyz()[0] == 200


SAME_ADDRESS_IDLE = 200


@pytest.mark.time_limit(90)
def test_probes_are_answered_while_their_own_address_floods_the_health_port(ready_sidecar):
    """200 connections from the probes' own address (the node's, as the kubelet's), each
    opened again as soon as the server closes it: far past the per-address cap, which must
    evict the connections that have sent nothing, not a probe whose request is on its way."""
    port = ready_sidecar.health_port
    # The neighbour is a process of its own, as on a node.
    with AttackProcess(port, idle=SAME_ADDRESS_IDLE, source=PROBER) as attack:
        answers = probe_while_attacked(ready_sidecar, PROBE_GAP / 4)
    reopened = attack.reopened
    failed = [a for a in answers if a[1] != 200]
    assert len(failed) < len(answers) / 100, (
        f"{len(failed)} of {len(answers)} probes failed: {failed[:5]}\n"
        f"{ready_sidecar.describe()}")
    assert len(answers) >= 40
    assert reopened > SAME_ADDRESS_IDLE  # the flood went on: the cap closed them again and again
    assert ready_sidecar.alive(), ready_sidecar.describe()
