#!/usr/bin/env bash
# Starts a real Kubernetes control plane on this machine: etcd and kube-apiserver v1.37,
# built from the Go module proxy (e2e/controlplane) on first use and cached outside the
# clone, with their data, keys and logs in DIR. For trying certctl against the real API
# server, and for the end-to-end tests' real backend.
#
# Usage: scripts/kube-up.sh DIR          build if needed, start, wait for /readyz; the last
#                                        line printed is `export KUBECONFIG=DIR/kubeconfig`
#        scripts/kube-up.sh --node DIR   the same, and one node that runs pods (as root; see
#                                        scripts/lib/kube-node.sh and docs/try-the-chart.md)
#        scripts/kube-up.sh --down DIR   stop all it started, node included, and undo what the
#                                        node changed on the host (nothing running: no error)
#        scripts/kube-up.sh --build      build only; prints the folder of the programs
# Env:   CERTCTL_CACHE_DIR  where the programs are kept (default ~/.cache/certctl), under
#                           controlplane/<kubernetes version>-<hash of the Go sources>
#        KUBE_UP_PORT       the API server's port on 127.0.0.1 (default: a free one)
#        KUBE_UP_KUBELET_SYNC  with --node: how often the kubelet syncs each pod (default
#                           1m, the kubelet's own), which bounds how late a changed Secret
#                           reaches the pods' volumes
#
# What the API server is set up with, as in a cluster: RBAC, service-account tokens (keys in
# DIR, so `kubectl create token` works), the default admission plugins (the webhook ones
# among them), the aggregation layer, and --enable-aggregator-routing, so that webhook and
# APIService calls go to the addresses in the Service's EndpointSlices while the
# certificate is verified for NAME.NAMESPACE.svc. DIR/node-ip is the address such an
# EndpointSlice names: the machine's own (EndpointSlice validation refuses loopback), where
# a webhook server listens for the API server's calls. DIR/audit.log is its audit log: one
# JSON line per request (user, verb, object, answer). Without --node no
# kube-controller-manager runs: nothing creates a namespace's default ServiceAccount, ends a
# deleted namespace, or runs a Job.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
sources=$repo/e2e/controlplane
cache=${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}
start_timeout=90
# The programs of the one executable, kube (e2e/controlplane/kube/main.go).
programs=(kube-apiserver etcd kubelet kube-controller-manager kube-scheduler)
# shellcheck source=scripts/lib/kube-node.sh
source "$repo/scripts/lib/kube-node.sh"

die() {
  echo "kube-up: $*" >&2
  exit 1
}

usage() {
  echo "usage: scripts/kube-up.sh DIR | --node DIR | --down DIR | --build" >&2
  exit 2
}

# The Kubernetes version the sources pin, e.g. v1.37.2.
kube_version() {
  awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$sources/go.mod"
}

# build: prints the folder holding kube-apiserver, etcd, and the node's kubelet,
# kube-controller-manager and kube-scheduler (links to one executable, kube),
# building it when the cache has no build of these exact sources with this Go.
build() {
  command -v go >/dev/null ||
    die "Go is not installed; install Go 1.26 or later (scripts/setup.sh says how) and retry"
  local go_version key out version ldflags gcflags
  go_version=$(go env GOVERSION)
  version=$(kube_version)
  # The version the API server reports (/version, kubectl version), as Kubernetes' own
  # release build stamps it.
  ldflags="-X k8s.io/component-base/version.gitVersion=$version"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=$(echo "$version" | cut -d. -f1 | tr -d v)"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$version"
  # Without DWARF (not compiled, not linked) and the symbol table, the build of this large
  # executable is shorter, and a test bed has no debugger to feed; panics still print their
  # stacks (pclntab stays). No other program shares its module, so no compiled package is
  # lost to the other Go builds.
  ldflags+=" -s -w"
  gcflags="all=-dwarf=false"
  [[ $go_version =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= 26)) ||
    die "Go 1.26 or later is needed to build kube-apiserver; this is $go_version"
  key=$(cat "$sources/go.mod" "$sources/go.sum" "$sources"/*/*.go \
    <(echo "$go_version $ldflags $gcflags") | sha256sum | cut -c1-12)
  out=$cache/controlplane/$version-$key
  if [[ -x $out/kube && -L $out/kubelet ]]; then
    echo "$out"
    return
  fi
  mkdir -p "$cache/controlplane"
  # Two callers at once (parallel test workers) build once: the second waits for the first.
  exec {lock}>"$cache/controlplane/.build.lock"
  flock "$lock"
  if [[ ! -x $out/kube || ! -L $out/kubelet ]]; then
    echo "kube-up: building Kubernetes $version (kube-apiserver, etcd, kubelet," \
      "kube-controller-manager, kube-scheduler) with $go_version (once per machine;" \
      "about 10 minutes the first time, Go's caches empty)" >&2
    local tmp log
    tmp=$(mktemp -d "$cache/controlplane/.build.XXXXXX")
    log=$tmp/build.log
    # One executable, kube, with a link per program (e2e/controlplane/kube/main.go).
    if ! (cd "$sources" && GOFLAGS=-mod=readonly CGO_ENABLED=0 \
      go build -trimpath -gcflags "$gcflags" -ldflags "$ldflags" -o "$tmp/kube" ./kube &&
      for program in "${programs[@]}"; do ln -s kube "$tmp/$program"; done) >"$log" 2>&1; then
      local reason
      if grep -qE 'dial tcp|no such host|i/o timeout|connection refused|TLS handshake' "$log"; then
        reason="the Go module proxy ($(go env GOPROXY)) could not be reached"
      else
        reason="go build failed"
      fi
      cp "$log" "$cache/controlplane/build-failed.log"
      rm -rf "$tmp"
      die "$reason: $(grep -v '^go: downloading' "$cache/controlplane/build-failed.log" |
        head -1) (whole log: $cache/controlplane/build-failed.log)"
    fi
    rm -f "$log"
    rm -rf "$out"
    mv "$tmp" "$out"
  fi
  exec {lock}>&-
  echo "$out"
}

# node_ip: an address of this machine that EndpointSlice validation accepts (not loopback,
# not link-local), where the API server's calls to webhooks arrive.
node_ip() {
  ip -4 -o addr show scope global 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}'
}

# free_port: a free port below the kernel's ephemeral range, where no outgoing connection
# can take it between this check and the server's bind.
free_port() {
  /usr/bin/python3 -c 'import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
while True:
    port = random.randrange(10000 if low > 12000 else 1024, low)
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            continue
    print(port)
    break'
}

port_in_use() {
  ! /usr/bin/python3 -c 'import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$1"
}

alive() {
  [[ -f $1 ]] && running "$(cat "$1")"
}

# running PID: the process exists and is not a zombie (the processes are detached, so
# init reaps them, and only when it gets round to it).
running() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z ]]
}

# stop_pidfile FILE: SIGTERM to the process FILE names, then SIGKILL after half a second.
# kube-apiserver's graceful shutdown drains its requests for seconds; nothing in DIR needs it
# (a start clears the data anyway).
stop_pidfile() {
  local pid i
  [[ -f $1 ]] || return 0
  pid=$(cat "$1")
  if running "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 5; i++)); do
      running "$pid" || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      running "$pid" || break
      sleep 0.05
    done
  fi
  rm -f "$1"
}

# down DIR: the node first (its kubelet would call a stopped API server), then the control
# plane.
down() {
  local dir=$1
  # Another folder's node is left alone; a node of this folder's that died leaves its changes
  # to undo.
  if node_owned_by "$dir" ||
    { ! node_running && [[ -f $dir/node-init.pid || -f $dir/kube-controller-manager.pid ]]; }; then
    node_stop "$dir"
  fi
  stop_pidfile "$dir/kube-apiserver.pid"
  stop_pidfile "$dir/etcd.pid"
}

# pki DIR NODE_IP WITH_NODE: a cluster CA, the API server's serving certificate, an admin
# client certificate (group system:masters), the front proxy's CA and client certificate
# (aggregation) and the service-account signing key; with a node, also the certificates of
# the kubelet (client and server), the controllers and the API server's calls to the
# kubelet. EC P-256: fast to make.
pki() {
  local dir=$1 node=$2 with_node=$3 pki=$1/pki
  mkdir -p "$pki"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  ca() { # ca NAME CN
    openssl req -x509 "${ec[@]}" -keyout "$pki/$1.key" -out "$pki/$1.crt" -days 3650 \
      -subj "/CN=$2" -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  }
  leaf() { # leaf NAME CA SUBJECT EXTENDED_KEY_USAGE [SAN]
    local ext=(-addext basicConstraints=critical,CA:FALSE -addext "extendedKeyUsage=$4")
    [[ -n ${5:-} ]] && ext+=(-addext "subjectAltName=$5")
    openssl req -x509 "${ec[@]}" -keyout "$pki/$1.key" -out "$pki/$1.crt" -days 3650 \
      -subj "$3" -CA "$pki/$2.crt" -CAkey "$pki/$2.key" "${ext[@]}" 2>/dev/null
  }
  ca ca kube-up-ca
  ca front-proxy-ca kube-up-front-proxy-ca
  leaf apiserver ca /CN=kube-apiserver serverAuth \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.0.0.1,IP:$node,IP:$node_host_ip"
  leaf admin ca "/O=system:masters/CN=kube-up-admin" clientAuth
  leaf front-proxy-client front-proxy-ca /CN=front-proxy-client clientAuth
  if $with_node; then
    leaf kubelet-client ca "/O=system:nodes/CN=system:node:$node_name" clientAuth
    leaf kubelet ca "/CN=$node_name" serverAuth "DNS:$node_name,IP:$node_ip"
    leaf kube-controller-manager ca /CN=system:kube-controller-manager clientAuth
    leaf kube-scheduler ca /CN=system:kube-scheduler clientAuth
    leaf apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  fi
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/sa.key" 2>/dev/null
  openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  chmod 600 "$pki"/*.key
}

# kubeconfig DIR FILE SERVER NAME: a kubeconfig for the client certificate DIR/pki/NAME.crt.
kubeconfig() {
  local dir=$1 file=$2 server=$3 name=$4
  local b64=(base64 -w0)
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
current-context: kube-up
clusters:
- name: kube-up
  cluster:
    server: $server
    certificate-authority-data: $("${b64[@]}" "$dir/pki/ca.crt")
users:
- name: kube-up-$name
  user:
    client-certificate-data: $("${b64[@]}" "$dir/pki/$name.crt")
    client-key-data: $("${b64[@]}" "$dir/pki/$name.key")
contexts:
- name: kube-up
  context:
    cluster: kube-up
    user: kube-up-$name
    namespace: default
EOF
  chmod 600 "$file"
}

# wait_ready URL PIDFILE LOG WHAT [CURL ARGS...]: until URL answers 200 "ok". Returns 3
# when the program exited because its port was taken (see start_attempts), dies otherwise.
wait_ready() {
  local url=$1 pidfile=$2 log=$3 what=$4 deadline=$((SECONDS + start_timeout))
  shift 4
  until [[ $(curl -s --max-time 2 "$@" "$url" 2>/dev/null) == ok ]]; do
    if ! alive "$pidfile"; then
      port_taken "$log" && return 3
      tail -n 5 "$log" >&2
      die "$what exited during start-up (log: $log)"
    fi
    ((SECONDS < deadline)) || die "$what not ready after ${start_timeout}s (log: $log)"
    sleep 0.2
  done
}

# A port free_port found free can still be bound by another program before ours binds it:
# parallel tests choose theirs from the same range. A program that lost that race is
# started again on other ports, this many times in all.
start_attempts=3

port_taken() {
  grep -q "address already in use" "$1"
}

# up DIR WITH_NODE
up() {
  local dir=$1 with_node=$2
  command -v openssl >/dev/null || die "openssl is not installed (scripts/setup.sh installs it)"
  command -v curl >/dev/null || die "curl is not installed (scripts/setup.sh installs it)"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if alive "$dir/kube-apiserver.pid" || alive "$dir/etcd.pid"; then
    die "a control plane already runs in $dir; stop it first: scripts/kube-up.sh --down $dir"
  fi
  if $with_node; then
    node_check_host
    node_claim "$dir"
  fi

  local bin node api_port etcd_port peer_port
  if [[ -n ${KUBE_UP_PORT:-} ]]; then
    api_port=$KUBE_UP_PORT
    [[ $api_port =~ ^[0-9]+$ ]] && ((api_port > 0 && api_port < 65536)) ||
      die "KUBE_UP_PORT is not a port number: $api_port"
    port_in_use "$api_port" && die "port $api_port on 127.0.0.1 is in use (KUBE_UP_PORT)"
  else
    api_port=$(free_port)
  fi
  node=$(node_ip)
  [[ -n $node ]] ||
    die "this machine has no non-loopback IPv4 address for webhook endpoints (see ip addr)"
  bin=$(build)

  # A fresh start: the data of an earlier run in DIR is cleared.
  rm -rf "$dir/etcd-data" "$dir/pki" "$dir/node"
  pki "$dir" "$node" "$with_node"
  echo "$node" >"$dir/node-ip"

  # --unsafe-no-fsync: a test bed's data need not survive a power cut, and fsync on a busy
  # disk makes every write slow. etcd's /health answers JSON: wait for it to say true.
  local attempt deadline
  for ((attempt = 1; ; attempt++)); do
    etcd_port=$(free_port)
    peer_port=$(free_port)
    rm -rf "$dir/etcd-data"
    setsid "$bin/etcd" --name kube-up --data-dir "$dir/etcd-data" \
      --listen-client-urls "http://127.0.0.1:$etcd_port" \
      --advertise-client-urls "http://127.0.0.1:$etcd_port" \
      --listen-peer-urls "http://127.0.0.1:$peer_port" \
      --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
      --initial-cluster "kube-up=http://127.0.0.1:$peer_port" \
      --unsafe-no-fsync --log-level warn \
      </dev/null >"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
    deadline=$((SECONDS + start_timeout))
    until curl -s --max-time 2 "http://127.0.0.1:$etcd_port/health" | grep -q '"health":"true"'; do
      if ! alive "$dir/etcd.pid"; then
        if port_taken "$dir/etcd.log" && ((attempt < start_attempts)); then
          echo "kube-up: etcd's port $etcd_port or $peer_port was taken; again on others" >&2
          continue 2
        fi
        die "etcd exited during start-up (log: $dir/etcd.log)"
      fi
      ((SECONDS < deadline)) || die "etcd not ready after ${start_timeout}s (log: $dir/etcd.log)"
      sleep 0.1
    done
    break
  done

  # The audit log is the API server's own request log: every request with its user, verb,
  # object and answer (the server's loopback client, which talks to itself, left out).
  cat >"$dir/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [system:apiserver]
- level: Metadata
EOF

  local pki=$dir/pki
  # How the API server calls the kubelet (logs, exec): only a node has one.
  local kubelet_client=()
  if $with_node; then
    kubelet_client=(--kubelet-client-certificate "$pki/apiserver-kubelet-client.crt"
      --kubelet-client-key "$pki/apiserver-kubelet-client.key"
      --kubelet-certificate-authority "$pki/ca.crt"
      --kubelet-preferred-address-types InternalIP)
  fi
  local status
  for ((attempt = 1; ; attempt++)); do
    setsid "$bin/kube-apiserver" \
      --etcd-servers "http://127.0.0.1:$etcd_port" \
      --bind-address 127.0.0.1 --secure-port "$api_port" --advertise-address "$node" \
      --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
      --client-ca-file "$pki/ca.crt" \
      --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
      "${kubelet_client[@]}" \
      --service-account-issuer https://kubernetes.default.svc.cluster.local \
      --service-account-key-file "$pki/sa.pub" \
      --service-account-signing-key-file "$pki/sa.key" \
      --service-cluster-ip-range 10.0.0.0/24 \
      --enable-aggregator-routing=true \
      --requestheader-client-ca-file "$pki/front-proxy-ca.crt" \
      --requestheader-allowed-names front-proxy-client \
      --requestheader-username-headers X-Remote-User \
      --requestheader-group-headers X-Remote-Group \
      --requestheader-extra-headers-prefix X-Remote-Extra- \
      --proxy-client-cert-file "$pki/front-proxy-client.crt" \
      --proxy-client-key-file "$pki/front-proxy-client.key" \
      --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/audit.log" \
      --audit-log-format json --audit-log-mode blocking \
      --profiling=false \
      </dev/null >"$dir/kube-apiserver.log" 2>&1 &
    echo $! >"$dir/kube-apiserver.pid"
    echo "$api_port" >"$dir/port"
    status=0
    wait_ready "https://127.0.0.1:$api_port/readyz" "$dir/kube-apiserver.pid" \
      "$dir/kube-apiserver.log" kube-apiserver \
      --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" || status=$?
    ((status == 0)) && break
    if [[ -n ${KUBE_UP_PORT:-} ]] || ((attempt >= start_attempts)); then
      tail -n 5 "$dir/kube-apiserver.log" >&2
      die "kube-apiserver exited during start-up: port $api_port was taken" \
        "(log: $dir/kube-apiserver.log)"
    fi
    echo "kube-up: kube-apiserver's port $api_port was taken; again on another" >&2
    api_port=$(free_port)
  done
  kubeconfig "$dir" "$dir/kubeconfig" "https://127.0.0.1:$api_port" admin
  echo "kube-up: kube-apiserver $(kube_version) at https://127.0.0.1:$api_port (etcd" \
    "127.0.0.1:$etcd_port, webhook endpoints on $node; logs and data in $dir)" >&2
  if $with_node; then
    node_network "$api_port"
    node_start "$dir" "$bin" "$api_port"
    echo "kube-up: node $node_name Ready (pods on $node_pod_net; the logs of the kubelet," \
      "containerd, kube-controller-manager and kube-scheduler in $dir and $dir/node)" >&2
  fi
  echo "export KUBECONFIG=$dir/kubeconfig"
}

case ${1:-} in
  --down)
    [[ $# -eq 2 ]] || usage
    # By its absolute path, which the node's owner file holds; a folder already removed
    # still has its node stopped.
    down "$(realpath -m "$2")"
    ;;
  --build)
    [[ $# -eq 1 ]] || usage
    build
    ;;
  --node)
    [[ $# -eq 2 ]] || usage
    dir=$(mkdir -p "$2" && cd "$2" && pwd)
    # A start that fails half-way leaves nothing running and undoes what it changed; one
    # refused because a node runs already leaves that node alone (down only stops the node
    # of its own folder).
    started=false
    trap '$started || down "$dir"' EXIT
    up "$dir" true
    started=true
    ;;
  -* | "") usage ;;
  *)
    [[ $# -eq 1 ]] || usage
    # A start that fails half-way leaves nothing running.
    started=false
    trap '$started || down "$1"' EXIT
    up "$1" false
    started=true
    ;;
esac
