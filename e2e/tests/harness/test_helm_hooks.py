"""Real Helm 3 against the emulator with the JobRunner playing the kubelet: a throwaway
chart's pre-/post-install hook Jobs run in order, `--wait` returns, the release is deployed,
and `helm upgrade` runs the hooks again; a failing hook fails the install."""

import json
import subprocess

import pytest

from harness.helm import find_helm, helm_env
from harness.kubelet import JobRunner

NS = "hooks"

# The hook "image": GETs the release's ConfigMap with the mounted token and prints one line.
FAKE = r'''#!/usr/bin/python3 -S
import http.client, json, os, ssl, sys
sa = os.environ["CERTCTL_SERVICEACCOUNT_DIR"]
ctx = ssl.create_default_context(cafile=os.path.join(sa, "ca.crt"))
conn = http.client.HTTPSConnection(os.environ["KUBERNETES_SERVICE_HOST"],
                                   int(os.environ["KUBERNETES_SERVICE_PORT"]), context=ctx)
conn.request("GET", "/api/v1/namespaces/%s/configmaps/%s" % (os.environ["POD_NAMESPACE"],
                                                              os.environ["CONFIGMAP"]),
             headers={"Authorization": "Bearer " + open(os.path.join(sa, "token")).read()})
resp = conn.getresponse()
body = json.loads(resp.read())
print(json.dumps({"args": sys.argv[1:], "configmap": resp.status,
                  "revision": (body.get("data") or {}).get("revision")}))
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
'''

CHART_YAML = """apiVersion: v2
name: hooks
version: 0.1.0
"""

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cfg
data:
  revision: "{{ .Release.Revision }}"
"""

# ServiceAccount, Role and RoleBinding are hooks too (weight -10: before the Jobs).
RBAC = """{{- define "hooks.annotations" }}
    "helm.sh/hook": pre-install,pre-upgrade,post-install,post-upgrade
    "helm.sh/hook-weight": "-10"
    "helm.sh/hook-delete-policy": before-hook-creation
{{- end }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}-hook
  annotations: {{- include "hooks.annotations" . }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Release.Name }}-hook
  annotations: {{- include "hooks.annotations" . }}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
  resourceNames: [{{ .Release.Name }}-cfg]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .Release.Name }}-hook
  annotations: {{- include "hooks.annotations" . }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .Release.Name }}-hook
subjects:
- kind: ServiceAccount
  name: {{ .Release.Name }}-hook
  namespace: {{ .Release.Namespace }}
"""

# pre: kept until the next run replaces it; post: deleted by Helm once it succeeded.
JOBS = """{{- $policies := dict "pre" "before-hook-creation" "post" "before-hook-creation,hook-succeeded" }}
{{- range $phase, $policy := $policies }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $.Release.Name }}-{{ $phase }}
  labels:
    app.kubernetes.io/instance: {{ $.Release.Name }}
  annotations:
    "helm.sh/hook": {{ $phase }}-install,{{ $phase }}-upgrade
    "helm.sh/hook-delete-policy": {{ $policy }}
spec:
  backoffLimit: {{ $.Values.backoffLimit }}
  activeDeadlineSeconds: 30
  template:
    spec:
      serviceAccountName: {{ $.Release.Name }}-hook
      restartPolicy: Never
      containers:
      - name: certctl
        image: ghcr.io/example/certctl:0.1.0
        command: [/certctl]
        args: [job, --phase, {{ if eq $phase "pre" }}secret{{ else }}inject{{ end }}]
        env:
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: CONFIGMAP
          value: {{ $.Release.Name }}-cfg
        - name: EXIT_CODE
          value: {{ if and $.Values.failPre (eq $phase "pre") }}"1"{{ else }}"0"{{ end }}
{{- end }}
"""

VALUES = """backoffLimit: 0
failPre: false
"""


@pytest.fixture
def helm(cluster, tmp_path):
    binary = find_helm()
    home = tmp_path / "home"
    env = helm_env(home, cluster.kubeconfig())

    def run(*args, check=True):
        proc = subprocess.run([binary, *args, "--namespace", NS], capture_output=True,
                              text=True, env=env, timeout=90)
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}{proc.stderr}\nemulator log:\n"
                                 f"{cluster.log()[-3000:]}")
        return proc
    return run


@pytest.fixture
def chart(tmp_path):
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(CHART_YAML)
    (root / "values.yaml").write_text(VALUES)
    (root / "templates" / "configmap.yaml").write_text(CONFIGMAP)
    (root / "templates" / "rbac.yaml").write_text(RBAC)
    (root / "templates" / "jobs.yaml").write_text(JOBS)
    return str(root)


@pytest.fixture
def fake(tmp_path):
    path = tmp_path / "fake-certctl"
    path.write_text(FAKE)
    path.chmod(0o755)
    return str(path)


def hook_runs(kubelet):
    return [(r.job, json.loads(r.stdout)) for r in kubelet.runs if r.exit_code == 0]


def test_helm_hooks_run_in_order(cluster, helm, chart, fake):
    cluster.api("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    with JobRunner(cluster, image_map={"certctl": fake}) as kubelet:
        helm("install", "rel", chart, "--wait", "--timeout", "60s")
        # pre-install ran before the release's ConfigMap existed, post-install after.
        assert hook_runs(kubelet) == [
            ("rel-pre", {"args": ["job", "--phase", "secret"], "configmap": 404,
                         "revision": None}),
            ("rel-post", {"args": ["job", "--phase", "inject"], "configmap": 200,
                          "revision": "1"})]
        assert all(r.user == f"system:serviceaccount:{NS}:rel-hook" for r in kubelet.runs)
        status = json.loads(helm("status", "rel", "-o", "json").stdout)
        assert (status["info"]["status"], status["version"]) == ("deployed", 1)
        jobs = sorted((h["last_run"]["started_at"], h["name"]) for h in status["hooks"]
                      if h["kind"] == "Job")
        assert [name for _, name in jobs] == ["rel-pre", "rel-post"]
        assert all(h["last_run"]["phase"] == "Succeeded" for h in status["hooks"])
        # Helm's release record, and the hook-succeeded policy at work.
        release = cluster.api("GET", f"/api/v1/namespaces/{NS}/secrets/sh.helm.release.v1."
                                     f"rel.v1").json()
        assert release["type"] == "helm.sh/release.v1"
        assert release["metadata"]["labels"]["status"] == "deployed"
        jobs = cluster.api("GET", f"/apis/batch/v1/namespaces/{NS}/jobs").json()["items"]
        assert [j["metadata"]["name"] for j in jobs] == ["rel-pre"]

        helm("upgrade", "rel", chart, "--wait", "--timeout", "60s")
        assert [job for job, _ in hook_runs(kubelet)] == ["rel-pre", "rel-post"] * 2
        assert [out["revision"] for _, out in hook_runs(kubelet)] == [None, "1", "1", "2"]
        assert len({r.uid for r in kubelet.runs}) == 4  # re-created Jobs: new uids
        status = json.loads(helm("status", "rel", "-o", "json").stdout)
        assert (status["info"]["status"], status["version"]) == ("deployed", 2)

        # A failing pre-install hook fails the install after backoffLimit retries.
        proc = helm("install", "bad", chart, "--wait", "--timeout", "60s",
                    "--set", "failPre=true,backoffLimit=1", check=False)
        assert proc.returncode != 0
        assert "pre-install" in proc.stderr and "BackoffLimitExceeded" in proc.stderr, \
            proc.stderr
        result = kubelet.wait_for("bad-pre", 5)
        assert [r.exit_code for r in result.runs] == [1, 1]
        assert kubelet.runs_of("bad-post") == []
        status = json.loads(helm("status", "bad", "-o", "json").stdout)
        assert status["info"]["status"] == "failed"
