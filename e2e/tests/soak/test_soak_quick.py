"""The lifecycle soak's quick form (e2e/soak/README.md): the whole life of a cluster, with
lifetimes compressed to seconds, and not one admission call failing that an event did not
declare, on a real kube-apiserver, which makes every admission call and whose own metrics
must count the failed ones the soak counted (`soak.py --backend emulator` runs the same life
on the emulator, by hand). The ten-minute runs and the
control runs are in bench/soak/."""

import os
import subprocess
import sys

import pytest

SOAK = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "soak", "soak.py")


@pytest.mark.time_limit(480)
@pytest.mark.parametrize("backend", ["real"])
def test_the_quick_soak_fails_no_admission_call_it_did_not_declare(certctl_binary, tmp_path,
                                                                   backend):
    report = tmp_path / "soak.md"
    proc = subprocess.run([sys.executable, SOAK, "--quick", "--seed", "1", "--certctl",
                           certctl_binary, "--backend", backend, "--report", str(report)],
                          capture_output=True, text=True, timeout=460)
    text = report.read_text() if report.exists() else proc.stdout
    print(text)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{text}\n{proc.stderr[-5000:]}"
    assert "**0 undeclared**" in text, text
    assert "not repaired" not in text, text
    if backend == "real":
        assert "which made the admission calls" in text, text
        assert "kube-apiserver's own count" in text, text
