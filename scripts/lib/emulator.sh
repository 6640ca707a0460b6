# Sourced by scripts. start_emulator DIR: starts the Kubernetes API emulator (e2e/kubeemu)
# with its state in DIR, waits until it serves, and exports KUBECONFIG (admin) and
# EMULATOR_PID. stop_emulator: stops it.
start_emulator() {
  local state=$1 root line=""
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  mkdir -p "$state"
  PYTHONPATH="$root/e2e" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m kubeemu \
    --state-dir "$state" >"$state/ready" 2>"$state/emulator.log" &
  EMULATOR_PID=$!
  for _ in $(seq 1 200); do
    line=$(head -n1 "$state/ready" 2>/dev/null || true)
    [[ $line == READY* ]] && break
    sleep 0.05
  done
  if [[ $line != READY* ]]; then
    echo "emulator did not start:" >&2
    cat "$state/emulator.log" >&2
    return 1
  fi
  export KUBECONFIG=$state/admin.kubeconfig EMULATOR_PID
  # kubectl caches discovery per server; keep that cache with the emulator's state.
  export KUBECACHEDIR=$state/kubecache
  echo "emulator serving at ${line#READY }"
}

stop_emulator() {
  if [[ -n ${EMULATOR_PID:-} ]]; then
    kill "$EMULATOR_PID" 2>/dev/null || true
    wait "$EMULATOR_PID" 2>/dev/null || true
    EMULATOR_PID=
  fi
}
