#!/usr/bin/env bash
# Whole-run timing: `certctl job` against the classic shell hook (bench/shell_hook.sh: openssl
# + kubectl), each on a fresh cluster state (no Secret, empty caBundles; reset before every
# run, not timed) and in steady state (everything already valid). Medians and ratios from
# hyperfine. On the Kubernetes API emulator, or with --real on a real kube-apiserver and etcd
# (scripts/kube-up.sh). Usage: bench/job_vs_shell.sh [--real] [RUNS]
# Env: CERTCTL_BINARY  the certctl to time (default: the release preset, built here), e.g.
#                      the static executable the image ships (scripts/build-static.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
real=false
[[ ${1:-} == --real ]] && { real=true; shift; }
runs=${1:-10}
source scripts/lib/emulator.sh

scripts/setup.sh
if [[ -n ${CERTCTL_BINARY:-} ]]; then
  certctl=$(realpath "$CERTCTL_BINARY")
else
  cmake --preset release >/dev/null
  cmake --build --preset release --target certctl >/dev/null
  certctl=$PWD/build/release/certctl
fi

work=$(mktemp -d)
if $real; then
  trap 'scripts/kube-up.sh --down "$work/kube" >/dev/null; rm -rf "$work"' EXIT
  eval "$(scripts/kube-up.sh "$work/kube" | tail -n 1)"
  export KUBECACHEDIR=$work/kubecache
else
  trap 'stop_emulator; rm -rf "$work"' EXIT
  start_emulator "$work/emulator" >/dev/null
fi

ns=bench service=hook secret=webhook-server-cert
kubectl create namespace $ns >/dev/null
webhook() {
  printf -- '- {name: %s, admissionReviewVersions: [v1], sideEffects: None, clientConfig: {service: {namespace: %s, name: %s}}}\n' "$1" $ns $service
}
{
  echo "apiVersion: admissionregistration.k8s.io/v1"
  echo "kind: ValidatingWebhookConfiguration"
  echo "metadata: {name: hook}"
  echo "webhooks:"
  webhook a.hook.io; webhook b.hook.io; webhook c.hook.io
  echo "---"
  echo "apiVersion: admissionregistration.k8s.io/v1"
  echo "kind: MutatingWebhookConfiguration"
  echo "metadata: {name: hook}"
  echo "webhooks:"
  webhook m.hook.io
} >"$work/webhooks.yaml"
kubectl apply -f "$work/webhooks.yaml" >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.hook.io}
spec:
  group: hook.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {service: {namespace: $ns, name: $service, path: /convert}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.metrics.hook.io}
spec: {group: metrics.hook.io, version: v1, groupPriorityMinimum: 1000, versionPriority: 15, service: {namespace: $ns, name: $service}}
YAML

# Back to "fresh": no Secret, every caBundle empty.
cat >"$work/reset.sh" <<SCRIPT
#!/usr/bin/env bash
kubectl delete secret $secret -n $ns --ignore-not-found >/dev/null
kubectl apply -f $work/webhooks.yaml >/dev/null
kubectl patch validatingwebhookconfiguration hook --type json -p '[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"},{"op":"remove","path":"/webhooks/1/clientConfig/caBundle"},{"op":"remove","path":"/webhooks/2/clientConfig/caBundle"}]' >/dev/null 2>&1 || true
kubectl patch mutatingwebhookconfiguration hook --type json -p '[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]' >/dev/null 2>&1 || true
kubectl patch crd widgets.hook.io --type json -p '[{"op":"remove","path":"/spec/conversion/webhook/clientConfig/caBundle"}]' >/dev/null 2>&1 || true
kubectl patch apiservice v1.metrics.hook.io --type json -p '[{"op":"remove","path":"/spec/caBundle"}]' >/dev/null 2>&1 || true
SCRIPT
chmod +x "$work/reset.sh"

job="$certctl job --log-level off -n $ns --service $service --secret $secret \
  --validating-webhook hook --mutating-webhook hook --crd widgets.hook.io --apiservice v1.metrics.hook.io"
shell="bench/shell_hook.sh $ns $service $secret hook hook widgets.hook.io v1.metrics.hook.io"

hyperfine --style basic --runs "$runs" --export-json "$work/fresh.json" \
  --prepare "$work/reset.sh" -n "shell hook, fresh" "$shell" -n "certctl job, fresh" "$job" >&2
# Steady state: one untimed run makes everything valid, then nothing should change.
$job
hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$work/steady.json" \
  -n "shell hook, steady" "$shell" >&2
$job
hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$work/steady-certctl.json" \
  -n "certctl job, steady" "$job" >&2

/usr/bin/python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
results = []
for name in ("fresh.json", "steady.json", "steady-certctl.json"):
    results += json.load(open(os.path.join(work, name)))["results"]
median = {r["command"]: r["median"] for r in results}
print(f"{'variant':24} {'median ms':>10}")
for command, value in median.items():
    print(f"{command:24} {value*1000:10.1f}")
for state in ("fresh", "steady"):
    ratio = median[f"shell hook, {state}"] / median[f"certctl job, {state}"]
    print(f"{state}: certctl job is {ratio:.1f}x faster than the shell hook")
PY
