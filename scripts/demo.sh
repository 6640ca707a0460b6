#!/usr/bin/env bash
# The main job on an embedded default, end to end:
#  1. build certctl; generate a CA and server pair offline and check it;
#  2. start the Kubernetes API emulator; create a namespace, the webhook's Service and a
#     ValidatingWebhookConfiguration with kubectl;
#  3. `certctl check` reports what is missing; 4. `certctl job` creates the Secret and
#     injects the CA bundle; 5. with the webhook's endpoint listed (an EndpointSlice, as the
#     cluster keeps it for a running pod), `certctl check` is green; 6. a second job writes
#     nothing;
#  7. prove it with a real TLS handshake: openssl s_server serves tls.crt and tls.key read
#     back from the Secret; openssl s_client trusts only the caBundle read back from the
#     webhook configuration and verifies the name the API server uses;
#  8. the sidecar: `certctl run` keeps a certificate folder that the example webhook server
#     (e2e/harness/webhook_server.py) serves; an AdmissionReview over verified TLS; a wiped
#     caBundle repaired by the controller, timed; both stopped with SIGTERM.
# Every stage's heading carries the time since the start, and a stage that lasts 10 s or
# more (setup, the build) says every 10 s that it is still running (scripts/lib/progress.sh).
#
# Usage: scripts/demo.sh          everything it started is stopped and removed at the end
#        scripts/demo.sh --keep   the emulator, with what the demo created, keeps running in
#                                 build/demo/ (certctl run and the webhook server are
#                                 stopped); the demo prints the KUBECONFIG to use it with
#        scripts/demo.sh --stop   stops the emulator a --keep run left and removes build/demo/
# Env:   CERTCTL_BINARY=path      runs that binary instead of building build/dev/certctl (the
#                                 demo builds only the certctl target of the dev preset)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/tls_proof.sh
source scripts/lib/emulator.sh
source scripts/lib/progress.sh

service=${DEMO_SERVICE:-demo-webhook}
namespace=${DEMO_NAMESPACE:-demo}
secret=webhook-server-cert
host="$service.$namespace.svc"
# Where --keep leaves the emulator's state and its pid; --stop reads it.
kept=$PWD/build/demo

usage() {
  sed -n '/^# Usage:/,/^# Env:/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

# kept_emulator_pid: the pid of the emulator a --keep run left, if it still runs.
kept_emulator_pid() {
  local pid cmdline
  pid=$(cat "$kept/emulator.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"-m kubeemu --state-dir $kept/emulator"* ]] || return 1
  echo "$pid"
}

# stop_kept: stops the emulator a --keep run left and removes build/demo/.
stop_kept() {
  local pid
  if pid=$(kept_emulator_pid); then
    kill "$pid"
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "demo: stopped the emulator a --keep run left (pid $pid)"
  fi
  if [[ -e $kept ]]; then
    rm -rf "$kept"
    echo "demo: removed $kept"
  elif [[ -z ${pid:-} ]]; then
    echo "demo: no emulator left by scripts/demo.sh --keep (no $kept)"
  fi
}

keep=false
case ${1:-} in
  "") ;;
  --keep) keep=true ;;
  --stop)
    stop_kept
    exit 0
    ;;
  -h | --help)
    usage
    exit 0
    ;;
  *)
    usage >&2
    exit 2
    ;;
esac
if (($# > 1)); then
  usage >&2
  exit 2
fi

# Tools the project installs itself (kubectl when the machine has none) live here.
export PATH="$PWD/.tools/bin:$PATH"

workdir=$(mktemp -d)
run_pid='' webhook_pid='' watch_pid=''
# Stops what act 8 started, if it is still running (a failed act).
stop_sidecar_act() {
  local pid
  for pid in $watch_pid $webhook_pid $run_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
# keep_emulator becomes true once a --keep run has passed: then the emulator stays. A
# --keep run that fails removes build/demo/ only once it has put its own emulator there.
keep_emulator=false emulator_state=''
cleanup() {
  stop_sidecar_act
  if ! $keep_emulator; then
    stop_emulator
    if [[ $emulator_state == "$kept/emulator" ]]; then rm -rf "$kept"; fi
  fi
  progress_stop
  rm -rf "$workdir"
}
trap cleanup EXIT
progress_start

progress_stage "setup: scripts/setup.sh --demo installs what is missing"
scripts/setup.sh --demo
if [[ -n ${CERTCTL_BINARY:-} ]]; then
  certctl=$(realpath "$CERTCTL_BINARY")
else
  # Only the executable, not the unit tests and benchmarks, through ccache; unoptimised (the
  # dev preset), which compiles in a third less time than the optimised ci preset.
  progress_stage "building certctl: scripts/build.sh dev --target certctl" "$workdir/build.log"
  # The compiler's lines go to the log (the ticker tells the step); on a failure, its end.
  if ! scripts/build.sh dev --target certctl >"$workdir/build.log" 2>&1; then
    tail -n 40 "$workdir/build.log" >&2
    echo "demo: the build failed (above, the end of its log)" >&2
    exit 1
  fi
  certctl=$PWD/build/dev/certctl
fi
"$certctl" version
if $keep; then
  # One kept emulator at a time: the one an earlier --keep run left is stopped.
  stop_kept
  emulator_state=$kept/emulator
else
  emulator_state=$workdir/emulator
fi

progress_stage "1. offline: certctl generate --service $service -n $namespace --out-dir $workdir/pair"
"$certctl" generate --service "$service" -n "$namespace" --out-dir "$workdir/pair"
"$certctl" check --cert-dir "$workdir/pair" --service "$service" -n "$namespace"

progress_stage "2. cluster: the Kubernetes API emulator, a namespace, a Service and a webhook configuration"
start_emulator "$emulator_state"
if $keep; then echo "$EMULATOR_PID" >"$kept/emulator.pid"; fi
echo "kubectl: $(command -v kubectl), $(kubectl version --client 2>/dev/null | head -n 1)"
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
progress_stage "3. certctl check before certctl has run: no Secret, empty caBundle, no webhook pod"
rc=0
"$certctl" check --secret "$secret" -n "$namespace" --service "$service" \
  --validating-webhook "$service" || rc=$?
if [[ $rc -ne 1 ]]; then
  echo "demo: expected check to report findings (exit 1), got exit $rc" >&2
  exit 1
fi

progress_stage "4. certctl job: create the Secret, inject the CA bundle"
"$certctl" job -n "$namespace" --service "$service" --secret "$secret" \
  --validating-webhook "$service"
kubectl get secret "$secret" -n "$namespace" -o jsonpath='{.type}{"  "}{.metadata.labels}{"\n"}'

progress_stage "5. the webhook's pod is listed behind its Service; certctl check: healthy"
# What the cluster's EndpointSlice controller writes once a ready pod backs the Service.
kubectl apply -f - <<YAML
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $service-demo
  namespace: $namespace
  labels: {kubernetes.io/service-name: $service}
addressType: IPv4
endpoints: [{addresses: [10.244.0.10], conditions: {ready: true}}]
ports: [{name: "", port: 9443, protocol: TCP}]
YAML
"$certctl" check --secret "$secret" -n "$namespace" --service "$service" \
  --validating-webhook "$service"

progress_stage "6. certctl job again: a steady cluster sees no write"
"$certctl" job -n "$namespace" --service "$service" --secret "$secret" \
  --validating-webhook "$service"

progress_stage "7. TLS handshake: the Secret's pair served, only the webhook's caBundle trusted, $host verified"
for key in tls.crt tls.key; do
  kubectl get secret "$secret" -n "$namespace" -o "jsonpath={.data.${key//./\\.}}" |
    base64 -d >"$workdir/$key"
done
kubectl get validatingwebhookconfiguration "$service" \
  -o 'jsonpath={.webhooks[0].clientConfig.caBundle}' | base64 -d >"$workdir/ca-bundle.crt"
tls_proof "$workdir/tls.crt" "$workdir/tls.key" "$workdir/ca-bundle.crt" "$host"

progress_stage "8. sidecar: certctl run keeps a certificate folder, the example webhook server serves it"
act=$workdir/sidecar
mkdir -p "$act"
# free_ports N: N distinct free ports, one per line. Bound together, so the kernel cannot
# hand the same port out twice (two separate asks once gave health and webhook one port).
free_ports() {
  /usr/bin/python3 -c '
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in held))' "$1"
}
# http_status PORT PATH: the status code of GET http://127.0.0.1:PORT/PATH (000 if none).
http_status() {
  local fd reply
  { exec {fd}<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || { echo 000; return; }
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&"$fd"
  reply=$(head -n1 <&"$fd" || true)
  exec {fd}>&-
  reply=${reply#HTTP/1.? }
  echo "${reply:0:3}"
}
fail() {
  echo "demo: $*" >&2
  for log in "$act"/*.log; do echo "--- $log" >&2; cat "$log" >&2; done
  exit 1
}
{ read -r health_port; read -r webhook_port; } < <(free_ports 2)
# --serving-addr: ready only once the webhook's own handshake verifies against the caBundle.
"$certctl" run -n "$namespace" --service "$service" --secret "$secret" \
  --validating-webhook "$service" --cert-dir "$act/certs" \
  --health-addr "127.0.0.1:$health_port" --metrics-addr "" \
  --serving-addr "127.0.0.1:$webhook_port" 2>"$act/certctl.log" &
run_pid=$!
/usr/bin/python3 e2e/harness/webhook_server.py --cert-dir "$act/certs" \
  --listen "127.0.0.1:$webhook_port" --ready-timeout 30 >"$act/webhook.out" 2>"$act/webhook.log" &
webhook_pid=$!
started=${EPOCHREALTIME/[.,]/}
for _ in $(seq 1 400); do
  [[ $(http_status "$health_port" /readyz) == 200 && -s $act/webhook.out ]] && break
  kill -0 "$run_pid" 2>/dev/null || fail "certctl run exited"
  kill -0 "$webhook_pid" 2>/dev/null || fail "the webhook server exited"
  sleep 0.05
done
[[ $(http_status "$health_port" /readyz) == 200 ]] || fail "certctl run not ready after 20s"
[[ -s $act/webhook.out ]] || fail "the webhook server is not listening after 20s"
echo "certctl run ready ($(((${EPOCHREALTIME/[.,]/} - started) / 1000)) ms): $act/certs/..data -> $(readlink "$act/certs/..data")"
echo "webhook server: $(head -n1 "$act/webhook.out"), $(grep -o 'loaded the certificate: serial=[0-9A-F]*' "$act/webhook.log")"

# The API server's call: trust only the caBundle of the configuration, verify $host.
kubectl get validatingwebhookconfiguration "$service" \
  -o 'jsonpath={.webhooks[0].clientConfig.caBundle}' | base64 -d >"$act/ca-bundle.crt"
# admission_call UID LABELS: POSTs an AdmissionReview for a ConfigMap; prints the answer.
admission_call() {
  local review
  review='{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"'$1'","kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},"name":"settings","namespace":"'$namespace'","operation":"CREATE","userInfo":{"username":"admin"},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"'$namespace'","labels":'$2'}}}}'
  printf 'POST /validate?timeout=10s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
    "$host" "${#review}" "$review" |
    openssl s_client -quiet -connect "127.0.0.1:$webhook_port" -servername "$host" \
      -verify_return_error -verify_hostname "$host" -CAfile "$act/ca-bundle.crt" \
      2>"$act/s_client.log" | sed -n '/^\r$/,$p' | tail -n +2
}
answer=$(admission_call demo-allow '{}') || fail "the call over TLS to $host failed"
echo "AdmissionReview, verified TLS to $host: $answer"
[[ $answer == *'"uid": "demo-allow", "allowed": true'* ]] || fail "unexpected answer: $answer"
answer=$(admission_call demo-deny '{"certctl-example/deny":"yes"}') || fail "the call over TLS to $host failed"
echo "AdmissionReview with the label certctl-example/deny: $answer"
[[ $answer == *'"uid": "demo-deny", "allowed": false'* ]] || fail "unexpected answer: $answer"

# Wipe the caBundle, as a helm upgrade rendering caBundle: "" would, and time the repair as
# a kubectl watch sees it: from the event that shows it blank to the one that shows it back.
bundle=$(kubectl get validatingwebhookconfiguration "$service" \
  -o 'jsonpath={.webhooks[0].clientConfig.caBundle}')
mkfifo "$act/watch.fifo"
kubectl get validatingwebhookconfiguration "$service" -w \
  -o 'jsonpath={.webhooks[0].clientConfig.caBundle}{"\n"}' >"$act/watch.fifo" 2>"$act/watch.log" &
watch_pid=$!
while IFS= read -r line; do
  echo "${EPOCHREALTIME/[.,]/} $line"
done <"$act/watch.fifo" >"$act/watch.events" &
reader_pid=$!
# repaired: sets blanked_at and restored_at (microseconds) from the watch's events.
repaired() {
  local at value
  blanked_at='' restored_at=''
  while read -r at value; do
    if [[ -z $blanked_at ]]; then
      [[ -z $value ]] && blanked_at=$at
    elif [[ $value == "$bundle" ]]; then
      restored_at=$at
      return 0
    fi
  done <"$act/watch.events"
  return 1
}
for _ in $(seq 1 200); do
  [[ -s $act/watch.events ]] && break
  sleep 0.05
done
[[ -s $act/watch.events ]] || fail "the kubectl watch did not start"
patched=${EPOCHREALTIME/[.,]/}
kubectl patch validatingwebhookconfiguration "$service" --type json \
  -p '[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}]' >/dev/null
for _ in $(seq 1 200); do
  repaired && break
  sleep 0.05
done
kill "$watch_pid"
wait "$watch_pid" 2>/dev/null || true
wait "$reader_pid" || true
watch_pid=''
repaired || fail "the caBundle was not repaired within 10s"
# The watch often delivers the blank and the repair together: the gap between them says
# little, so the figure is from the start of kubectl patch (its own start-up included).
seen_blank=$(((restored_at - blanked_at) / 1000))
echo "caBundle wiped with kubectl patch: restored $(((restored_at - patched) / 1000)) ms after" \
  "kubectl patch started (kubectl's start-up included)$( ((seen_blank > 0)) &&
    echo "; the watch saw it blank for $seen_blank ms")"
[[ $(http_status "$health_port" /readyz) == 200 ]] || fail "certctl run not ready after the repair"
answer=$(admission_call demo-after '{}') || fail "the call over TLS to $host failed"
[[ $answer == *'"allowed": true'* ]] || fail "unexpected answer after the repair: $answer"
echo "after the repair: /readyz 200, AdmissionReview answered over verified TLS"

kill -TERM "$webhook_pid" "$run_pid"
webhook_rc=0 run_rc=0
wait "$webhook_pid" || webhook_rc=$?
wait "$run_pid" || run_rc=$?
webhook_pid='' run_pid=''
echo "SIGTERM: certctl run exited $run_rc, the webhook server exited $webhook_rc"
[[ $run_rc -eq 0 && $webhook_rc -eq 0 ]] || fail "a process did not exit 0 on SIGTERM"

progress_stage "demo passed: $host is served with a certificate the API server trusts"
if $keep; then
  keep_emulator=true
  echo "The emulator keeps running (pid $EMULATOR_PID) with the namespace $namespace, the Secret"
  echo "$secret and the ValidatingWebhookConfiguration $service. Use it with:"
  if [[ $(command -v kubectl) == "$PWD/.tools/bin/"* ]]; then
    echo "  export PATH=$PWD/.tools/bin:\$PATH"
  fi
  echo "  export KUBECONFIG=$KUBECONFIG"
  echo "  kubectl get validatingwebhookconfiguration $service -o yaml"
  echo "  $certctl check -n $namespace --secret $secret --service $service --validating-webhook $service"
  echo "Stop it and remove $kept with:"
  echo "  $PWD/scripts/demo.sh --stop"
fi
