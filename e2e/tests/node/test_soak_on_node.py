"""The lifecycle soak's quick form (e2e/soak/README.md) on a real node: the whole life of a
cluster, lifetimes compressed to seconds, with the kubelet and containerd running the chart's
pods and hook Jobs, kube-controller-manager rolling the Deployments out and writing the
EndpointSlices, and kube-apiserver making every admission call — not one of them failing
that an event did not declare, and kube-apiserver's own metrics counting the failed ones the
soak counted. `soak.py --backend real` (pods played by the harness) and `--backend emulator`
run the same life by hand; the ten-minute runs and the control runs are in bench/soak/."""

import os
import subprocess
import sys

import pytest

from harness.node import node_problem

pytestmark = pytest.mark.skipif(node_problem() is not None, reason=str(node_problem()))

SOAK = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "soak", "soak.py")


@pytest.mark.time_limit(600)
def test_the_quick_soak_on_a_node_fails_no_admission_call_it_did_not_declare(certctl_binary,
                                                                              tmp_path):
    report = tmp_path / "soak.md"
    proc = subprocess.run([sys.executable, SOAK, "--quick", "--seed", "1", "--certctl",
                           certctl_binary, "--backend", "node", "--report", str(report)],
                          capture_output=True, text=True, timeout=580)
    text = report.read_text() if report.exists() else proc.stdout
    print(text)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{text}\n{proc.stderr[-5000:]}"
    assert "**0 undeclared**" in text, text
    assert "not repaired" not in text, text
    assert "the kubelet and containerd ran the pods and Jobs" in text, text
    assert "kube-apiserver's own count" in text, text
