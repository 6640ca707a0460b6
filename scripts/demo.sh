#!/usr/bin/env bash
# The main job on an embedded default, end to end:
#  1. build certctl; generate a CA and server pair offline and check it;
#  2. start the Kubernetes API emulator; create a namespace, the webhook's Service and a
#     ValidatingWebhookConfiguration with kubectl;
#  3. `certctl check` reports what is missing; 4. `certctl job` creates the Secret and
#     injects the CA bundle; 5. `certctl check` is green; 6. a second job writes nothing;
#  7. prove it with a real TLS handshake: openssl s_server serves tls.crt and tls.key read
#     back from the Secret; openssl s_client trusts only the caBundle read back from the
#     webhook configuration and verifies the name the API server uses.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tls_proof.sh
source scripts/lib/emulator.sh

service=${DEMO_SERVICE:-demo-webhook}
namespace=${DEMO_NAMESPACE:-demo}
secret=webhook-server-cert
host="$service.$namespace.svc"

scripts/setup.sh
echo "== building certctl"
scripts/build.sh ci >/dev/null
certctl=$PWD/build/ci/certctl
"$certctl" version

workdir=$(mktemp -d)
trap 'stop_emulator; rm -rf "$workdir"' EXIT

echo "== 1. offline: certctl generate --service $service -n $namespace --out-dir $workdir/pair"
"$certctl" generate --service "$service" -n "$namespace" --out-dir "$workdir/pair"
"$certctl" check --cert-dir "$workdir/pair" --service "$service" -n "$namespace"

echo "== 2. cluster: the Kubernetes API emulator, a namespace, a Service and a webhook configuration"
start_emulator "$workdir/emulator"
kubectl create namespace "$namespace"
kubectl apply -f - <<YAML
apiVersion: v1
kind: Service
metadata: {name: $service, namespace: $namespace}
spec:
  ports: [{port: 443, targetPort: 9443}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: $service}
webhooks:
- name: validate.$service.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig:
    service: {namespace: $namespace, name: $service, path: /validate}
  rules:
  - {operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}
YAML
echo "== 3. certctl check before certctl has run: no Secret, empty caBundle"
rc=0
"$certctl" check --secret "$secret" -n "$namespace" --service "$service" \
  --validating-webhook "$service" || rc=$?
if [[ $rc -ne 1 ]]; then
  echo "demo: expected check to report findings (exit 1), got exit $rc" >&2
  exit 1
fi

echo "== 4. certctl job: create the Secret, inject the CA bundle"
"$certctl" job -n "$namespace" --service "$service" --secret "$secret" \
  --validating-webhook "$service"
kubectl get secret "$secret" -n "$namespace" -o jsonpath='{.type}{"  "}{.metadata.labels}{"\n"}'

echo "== 5. certctl check: healthy"
"$certctl" check --secret "$secret" -n "$namespace" --service "$service" \
  --validating-webhook "$service"

echo "== 6. certctl job again: a steady cluster sees no write"
"$certctl" job -n "$namespace" --service "$service" --secret "$secret" \
  --validating-webhook "$service"

echo "== 7. TLS handshake: the Secret's pair served, only the webhook's caBundle trusted, $host verified"
for key in tls.crt tls.key; do
  kubectl get secret "$secret" -n "$namespace" -o "jsonpath={.data.${key//./\\.}}" |
    base64 -d >"$workdir/$key"
done
kubectl get validatingwebhookconfiguration "$service" \
  -o 'jsonpath={.webhooks[0].clientConfig.caBundle}' | base64 -d >"$workdir/ca-bundle.crt"
tls_proof "$workdir/tls.crt" "$workdir/tls.key" "$workdir/ca-bundle.crt" "$host"

echo "== demo passed: $host is served with a certificate the API server trusts"
