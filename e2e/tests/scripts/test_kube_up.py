"""scripts/kube-up.sh: a start that prints the export line last and answers /version as
v1.37, a second start in the same folder refused while the first runs, --down idempotent,
and the three ways it cannot start (no Go, an unreachable module proxy, a port in use),
each one line and exit 1 with nothing left running."""

import os
import shutil
import socket
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
KUBE_UP = os.path.join(REPO, "scripts", "kube-up.sh")


def kube_up(*args, env=None, timeout=600):
    return subprocess.run([KUBE_UP, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def one_line(result):
    """kube-up's own lines (the build's progress line aside): exactly one, the reason."""
    lines = [line for line in result.stderr.splitlines() if not line.startswith(
        "kube-up: building")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def running(folder):
    out = []
    for name in ("etcd", "kube-apiserver"):
        pidfile = folder / f"{name}.pid"
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), 0)
                out.append(name)
            except ProcessLookupError:
                pass
    return out


@pytest.mark.time_limit(120)
def test_up_twice_and_down_twice(tmp_path):
    folder = tmp_path / "k"
    try:
        up = kube_up(str(folder))
        assert up.returncode == 0, up.stderr
        assert up.stdout.splitlines()[-1] == f"export KUBECONFIG={folder}/kubeconfig"
        assert sorted(running(folder)) == ["etcd", "kube-apiserver"]
        node_ip = (folder / "node-ip").read_text().strip()
        assert node_ip and not node_ip.startswith("127."), node_ip
        version = subprocess.run(
            ["curl", "-s", "--cacert", folder / "pki" / "ca.crt",
             f"https://127.0.0.1:{(folder / 'port').read_text().strip()}/version"],
            capture_output=True, text=True, check=True).stdout
        assert '"gitVersion": "v1.37.' in version, version

        again = kube_up(str(folder))
        assert again.returncode == 1
        assert one_line(again) == (f"kube-up: a control plane already runs in {folder}; stop "
                                   f"it first: scripts/kube-up.sh --down {folder}")
        assert sorted(running(folder)) == ["etcd", "kube-apiserver"]  # the first one stays
    finally:
        down = kube_up("--down", str(folder))
    assert down.returncode == 0 and down.stderr == "", down.stderr
    assert running(folder) == []
    assert kube_up("--down", str(folder)).returncode == 0
    assert kube_up("--down", str(tmp_path / "never-used")).returncode == 0


def test_a_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = kube_up(str(tmp_path / "k"), env={"KUBE_UP_PORT": str(port)})
    assert result.returncode == 1
    assert one_line(result) == f"kube-up: port {port} on 127.0.0.1 is in use (KUBE_UP_PORT)"
    assert running(tmp_path / "k") == []


def test_missing_go_is_one_line(tmp_path):
    # PATH without the folder that holds go, everything else kept.
    go = shutil.which("go")
    folders = [d for d in os.environ["PATH"].split(os.pathsep)
               if not go or os.path.realpath(d) != os.path.realpath(os.path.dirname(go))]
    result = kube_up(str(tmp_path / "k"), env={"PATH": os.pathsep.join(folders)})
    assert result.returncode == 1
    assert one_line(result).startswith("kube-up: Go is not installed; install Go 1.26 or later")
    assert running(tmp_path / "k") == []


def test_an_unreachable_module_proxy_is_one_line(tmp_path):
    # An empty build cache and module cache, so the build must download; the proxy refuses.
    env = {"CERTCTL_CACHE_DIR": str(tmp_path / "cache"), "GOMODCACHE": str(tmp_path / "mod"),
           "GOPROXY": "http://127.0.0.1:1"}
    result = kube_up(str(tmp_path / "k"), env=env, timeout=120)
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith("kube-up: the Go module proxy (http://127.0.0.1:1) could not be "
                           "reached: "), line
    assert line.endswith(f"(whole log: {tmp_path}/cache/controlplane/build-failed.log)"), line
    assert running(tmp_path / "k") == []
