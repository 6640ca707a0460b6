"""Bad cluster connections: kubeconfigs that are not YAML, not a kubeconfig, or whose current
context, user, cluster or server is missing; and an API server whose certificate comes from
another CA than the one certctl was told to trust (in a pod and through a kubeconfig).

docs/exit-codes.md: check exits 2 when it could not run (an unreadable kubeconfig, an API it
cannot talk to), job exits 1 when anything failed, and run exits 1 when its cluster
configuration cannot be loaded at start; an API it cannot verify is no reason for run to
exit: it keeps running and reports not ready. Every message is one line that names the
kubeconfig file and the key at fault. Nothing reaches the emulator in the first group, and
nothing is written in the second.
"""

import base64
import json
import os

import pytest
import yaml

from harness.badpki import Authority
from harness.corpus import SECRET_OBJ, USER, one_line

TARGET = ["--validating-webhook", "hook"]
FAILED = {"check": 2, "job": 1, "run": 1}
RUN_EXIT_BOUND = 3.0


def base_config(stage):
    """certctl's service account as a kubeconfig (what Cluster.add_user wrote)."""
    with open(stage.cluster.kubeconfig(USER), encoding="utf-8") as f:
        return yaml.safe_load(f)


def write(stage, name, content):
    path = os.path.join(stage.workdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    return path


def edited(stage, name, change):
    config = base_config(stage)
    change(config)
    return write(stage, name, config)


def set_path(config, dotted, value):
    *parents, leaf = dotted.split(".")
    node = config
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[leaf] = value


# Each case writes its kubeconfig and says what the message must name besides the path:
# (make(stage) -> (path, extra args, environment), [texts]).
def kubeconfig_flag(make_path):
    def make(stage):
        path = make_path(stage)
        return path, ["--kubeconfig", path], {}
    return make


KUBECONFIGS = {
    "invalid-yaml": (kubeconfig_flag(lambda s: write(
        s, "invalid.yaml", "apiVersion: v1\nkind: Config\nclusters: [\n  - name: x\n"
                           "    cluster: {server: 'https://x'\n")), ["YAML", "line"]),
    "tab-indented-yaml": (kubeconfig_flag(lambda s: write(
        s, "tabs.yaml", "apiVersion: v1\nclusters:\n\t- name: x\n")), ["YAML", "line"]),
    "not-a-mapping": (kubeconfig_flag(lambda s: write(s, "scalar.yaml", "just words\n")),
                      ["mapping"]),
    "empty-file": (kubeconfig_flag(lambda s: write(s, "empty.yaml", "")), ["current-context"]),
    "current-context-unset": (kubeconfig_flag(lambda s: edited(
        s, "no-current.json", lambda c: c.pop("current-context"))), ["current-context"]),
    "current-context-names-nothing": (kubeconfig_flag(lambda s: edited(
        s, "gone-context.json", lambda c: set_path(c, "current-context", "gone"))),
        ['"gone"']),
    "context-names-missing-user": (kubeconfig_flag(lambda s: edited(
        s, "ghost-user.json", lambda c: set_path(c, "contexts.0.context.user", "ghost"))),
        ["user", '"ghost"']),
    "context-names-missing-cluster": (kubeconfig_flag(lambda s: edited(
        s, "no-cluster.json", lambda c: set_path(c, "contexts.0.context.cluster", "nowhere"))),
        ["cluster", '"nowhere"']),
    "cluster-without-server": (kubeconfig_flag(lambda s: edited(
        s, "no-server.json", lambda c: c["clusters"][0]["cluster"].pop("server"))),
        ["server"]),
    "users-not-a-list": (kubeconfig_flag(lambda s: edited(
        s, "users-map.json", lambda c: set_path(c, "users", {"name": "x"}))), ["users"]),
    "file-does-not-exist": (kubeconfig_flag(lambda s: os.path.join(s.workdir, "absent.yaml")),
                            []),
}


def context_flag_names_nothing(stage):
    path = stage.cluster.kubeconfig(USER)
    return path, ["--kubeconfig", path, "--context", "nope"], {}


def env_list_with_a_bad_file(stage):
    bad = write(stage, "second.yaml", "kind: Config\nusers: [\n")
    return bad, [], {"KUBECONFIG": f"{stage.cluster.kubeconfig(USER)}:{bad}"}


KUBECONFIGS["context-flag-names-nothing"] = (context_flag_names_nothing, ['"nope"'])
KUBECONFIGS["kubeconfig-env-list-second-invalid"] = (env_list_with_a_bad_file, ["YAML"])


@pytest.mark.parametrize("command", ["check", "job", "run"])
@pytest.mark.parametrize("case", list(KUBECONFIGS))
def test_unusable_kubeconfig(healthy, case, command):
    make, named = KUBECONFIGS[case]
    path, args, env = make(healthy)
    before = healthy.snapshot()
    if command == "run":
        with healthy.run_process(*TARGET, *args, env=env) as run:
            code = run.exit_code(RUN_EXIT_BOUND)
            stderr = run.log()
    else:
        result = healthy.certctl(command, *TARGET, *args, env=env)
        code, stderr = result.returncode, result.stderr
        assert result.stdout == "", result.stdout
    assert code == FAILED[command], (code, stderr)
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"certctl {command}: "), stderr
    for text in [path, *named]:
        assert text in lines[0], f"the message does not name {text!r}: {lines[0]}"
    assert healthy.requests_by_certctl() == []
    assert healthy.snapshot() == before


# --- an API server certificate from another CA ---------------------------------------------

def in_pod_trusting(stage, ca_pem):
    env = stage.env()
    with open(os.path.join(env["CERTCTL_SERVICEACCOUNT_DIR"], "ca.crt"), "w",
              encoding="utf-8") as f:
        f.write(ca_pem)
    return env


def kubeconfig_trusting(stage, ca_pem):
    config = base_config(stage)
    config["clusters"][0]["cluster"]["certificate-authority-data"] = \
        base64.b64encode(ca_pem.encode()).decode()
    return {"KUBECONFIG": write(stage, "impostor-ca.json", config)}


TRUST = {"service-account-ca": in_pod_trusting, "kubeconfig-ca-data": kubeconfig_trusting}


def mentions_verification(text):
    return "certificate" in text.lower() or "verif" in text.lower()


@pytest.mark.parametrize("command", ["check", "job", "run"])
@pytest.mark.parametrize("where", list(TRUST))
def test_server_certificate_from_another_ca(healthy, where, command):
    env = TRUST[where](healthy, Authority("impostor-ca").cert_pem)
    before = healthy.snapshot()
    if command == "run":
        with healthy.run_process(*TARGET, env=env) as run:
            status, body = run.verdict()
            assert status == 503, (status, body)
            assert body.startswith("not ready: ") and body.count("\n") == 1, body
            assert SECRET_OBJ in body and mentions_verification(body), body
            assert run.get("/healthz") == (200, "ok\n")
            assert not os.path.exists(run.ready_file)
            code, took = run.stop()
        assert code == 0 and took < 5, (code, took, run.log())
    else:
        result = healthy.certctl(command, *TARGET, env=env)
        assert result.returncode == FAILED[command], (result.returncode, result.stderr)
        line = one_line(result, command)
        assert SECRET_OBJ in line and mentions_verification(line), line
    assert healthy.writes(events=True) == []
    assert healthy.snapshot() == before
