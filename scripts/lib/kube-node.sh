# Sourced by scripts/kube-up.sh: one Kubernetes node on this machine beside the control
# plane, for `scripts/kube-up.sh --node DIR` — containerd and the kubelet, which run pods for
# real, and kube-controller-manager and kube-scheduler, which make Deployments, Jobs and
# ServiceAccounts happen.
#
# Everything the node changes on the host stays where teardown can undo it:
# - the kubelet and containerd run in a network namespace of their own (certctl-node), so
#   the pods' bridge, the iptables chains they add and their ip_forward stay inside it; the
#   host keeps a veth pair to it, a route to the pods and one nat chain (CERTCTL-NODE) that
#   sends the node's calls to the API server on 127.0.0.1;
# - in a mount namespace of their own, where /run, /var/lib and /var/log are folders of
#   DIR/node and the kernel settings the kubelet would write (kernel.panic, vm.overcommit_memory
#   and others) are files of DIR/node: nothing they mount is seen by the host;
# - in a cgroup of their own (certctl-node, in every hierarchy), which the pods' cgroups go
#   under too: teardown kills what is in it and removes it.
# One node a machine: the namespace's name is the lock, and $cache/node/owner names the DIR
# that holds it.
# shellcheck shell=bash

node_netns=certctl-node
node_name=certctl-node
node_cgroup=certctl-node
node_nat_chain=CERTCTL-NODE
node_host_if=certctl-node # the host's end of the veth pair; the node's end is its eth0
node_host_ip=10.203.0.1
node_ip=10.203.0.2
node_link_net=10.203.0.0/30
node_pod_net=10.204.0.0/24
node_service_ip=10.0.0.1 # the `kubernetes` Service, first of --service-cluster-ip-range
node_node_sources=$repo/e2e/node
# How often the kubelet syncs each pod, which bounds how late a changed Secret reaches the
# pods' volumes: the kubelet's default unless KUBE_UP_KUBELET_SYNC says otherwise.
node_sync=${KUBE_UP_KUBELET_SYNC:-1m}

# node_owner_file: where the DIR of the running node is written.
node_owner_file() { echo "$cache/node/owner"; }

node_running() { ip netns list 2>/dev/null | grep -qw "^$node_netns"; }

node_owned_by() { [[ -f $(node_owner_file) && $(cat "$(node_owner_file)") == "$1" ]]; }

# node_check_host: what the node needs of this machine, each missing thing named.
node_check_host() {
  [[ $node_sync =~ ^[0-9]+(ms|s|m)$ ]] ||
    die "KUBE_UP_KUBELET_SYNC is not a duration like 1m, 5s or 500ms: $node_sync"
  (($(id -u) == 0)) || die "--node needs root (the node makes namespaces, cgroups and routes)"
  local tool
  for tool in containerd containerd-shim-runc-v2 ctr runc iptables nsenter unshare podman gcc; do
    command -v "$tool" >/dev/null || die "--node needs $tool, which scripts/setup.sh installs"
  done
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
    die "--node needs the CNI plugins in /usr/lib/cni (containernetworking-plugins; scripts/setup.sh installs it)"
  [[ -d /sys/fs/cgroup/pids && -d /sys/fs/cgroup/memory && -d /sys/fs/cgroup/cpuset ]] ||
    die "--node expects cgroup v1 hierarchies under /sys/fs/cgroup (pids, memory, cpuset...)"
}

# node_claim DIR: takes the one node of this machine for DIR, or says who has it.
node_claim() {
  local dir=$1 owner
  if node_running; then
    owner=$(cat "$(node_owner_file)" 2>/dev/null || echo "an unknown folder")
    [[ $owner == "$dir" ]] &&
      die "a node already runs in $dir; stop it first: scripts/kube-up.sh --down $dir"
    die "a node already runs on this machine (for $owner); one node a machine: stop it first: scripts/kube-up.sh --down $owner"
  fi
  if ip -4 route show | grep -qE "^(${node_link_net%/*}|${node_pod_net%/*})"; then
    die "the node's addresses ($node_link_net, $node_pod_net) are routed on this machine already"
  fi
  mkdir -p "$cache/node"
  echo "$dir" >"$(node_owner_file)"
  # `ip netns add` makes /run/netns (a mount) when the machine has none: teardown removes
  # it again then.
  [[ -d /run/netns ]] || touch "$cache/node/made-run-netns"
  ip netns add "$node_netns"
}

# node_network: the veth pair, the node's addresses and routes, and the host's one nat chain.
node_network() {
  local api_port=$1 in_node=(ip netns exec "$node_netns")
  ip link add "$node_host_if" type veth peer name eth0 netns "$node_netns"
  ip addr add "$node_host_ip/30" dev "$node_host_if"
  ip link set "$node_host_if" up
  # The API server listens on 127.0.0.1 only: the node's calls to it arrive on the veth and
  # are sent to loopback, which the kernel allows only with route_localnet on that interface.
  sysctl -qw "net.ipv4.conf.$node_host_if.route_localnet=1"
  ip route add "$node_pod_net" via "$node_ip" dev "$node_host_if"
  iptables -w -t nat -N "$node_nat_chain"
  iptables -w -t nat -A "$node_nat_chain" -d "$node_host_ip" -p tcp --dport "$api_port" \
    -j DNAT --to-destination "127.0.0.1:$api_port"
  iptables -w -t nat -A PREROUTING -i "$node_host_if" -j "$node_nat_chain"

  "${in_node[@]}" ip link set lo up
  "${in_node[@]}" ip addr add "$node_ip/30" dev eth0
  "${in_node[@]}" ip link set eth0 up
  "${in_node[@]}" ip route add default via "$node_host_ip"
  # Inside the node's namespace only: it routes between the pods' bridge and the host.
  "${in_node[@]}" sysctl -qw net.ipv4.ip_forward=1
  # The pods reach the API server at the `kubernetes` Service's address, as in a cluster
  # (no kube-proxy runs: the API server calls webhooks at their endpoints, not their
  # Service's address).
  "${in_node[@]}" iptables -w -t nat -A PREROUTING -d "$node_service_ip" -p tcp --dport 443 \
    -j DNAT --to-destination "$node_host_ip:$api_port"
}

# node_configs DIR API_PORT: containerd's, the CNI's and the kubelet's settings.
node_configs() {
  local dir=$1 api_port=$2 node=$1/node
  mkdir -p "$node/run" "$node/var-lib" "$node/log" "$node/cni" "$node/sysctl"
  cat >"$node/containerd.toml" <<EOF
version = 2
root = "$node/containerd"
state = "/run/containerd"
# The plugin that would install to /opt, and snapshotters this machine has no use for.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:dev"
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails in runc.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
EOF
  cat >"$node/cni/10-certctl-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "certctl-node",
  "plugins": [{
    "type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true,
    "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$node_pod_net"}]]}
  }]
}
EOF
  cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: AlwaysAllow}
tlsCertFile: $dir/pki/kubelet.crt
tlsPrivateKeyFile: $dir/pki/kubelet.key
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$node_cgroup
# This machine: cgroup v1, swap allowed.
failCgroupV1: false
failSwapOn: false
syncFrequency: $node_sync
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: /var/log/pods
volumePluginDir: $node/volume-plugins
# The images are loaded, never pulled: nothing may collect them.
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
EOF
  kubeconfig "$dir" "$node/kubelet.kubeconfig" "https://$node_host_ip:$api_port" kubelet-client
}

# node_images DIR: the sandbox's pause image, certctl's and the example webhook's, built when
# missing or outdated, then loaded into the node's containerd.
node_images() {
  local dir=$1 key
  log_node "building the node's images (the first time: certctl's static executable, minutes)"
  key=$(sha256sum "$node_node_sources/pause.c" | cut -c1-12)
  if [[ $(podman image inspect --format '{{index .Labels "io.certctl.source"}}' \
    localhost/pause:dev 2>/dev/null) != "$key" ]]; then
    local context
    context=$(mktemp -d)
    gcc -static -Os -s -Wall -Wextra -Werror -o "$context/pause" "$node_node_sources/pause.c"
    printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' |
      podman build --quiet --network none --label "io.certctl.source=$key" \
        -t localhost/pause:dev -f - "$context" >/dev/null
    rm -rf "$context"
  fi
  "$repo/scripts/build-example-webhook.sh" >/dev/null
  "$repo/scripts/build-image.sh" >/dev/null
  podman tag localhost/certctl:latest localhost/certctl:dev
  local image archive
  for image in localhost/pause:dev localhost/certctl:dev localhost/example-webhook:dev; do
    archive=$dir/node/image.tar
    podman save --quiet -o "$archive" "$image"
    node_ctr "$dir" -n k8s.io images import --no-unpack=false "$archive" >/dev/null
    rm -f "$archive"
  done
}

log_node() { echo "kube-up: $*" >&2; }

# node_ctr DIR ARGS...: ctr against the node's containerd, from inside the node's mount
# namespace: the socket's path seen from the host, under DIR, may be longer than a unix
# socket's address can hold.
node_ctr() {
  local dir=$1
  shift
  nsenter --target "$(cat "$dir/node-init.pid")" --mount \
    ctr --address /run/containerd/containerd.sock "$@"
}

# node_start DIR BIN API_PORT: the node's own processes, then the controllers, then waits
# until the Node is Ready and the default namespace has its ServiceAccount.
node_start() {
  local dir=$1 bin=$2 api_port=$3 node=$1/node
  node_configs "$dir" "$api_port"
  # The init of the node: joins the node's cgroup, masks what the host must not see, starts
  # containerd and the kubelet (e2e/node/node-init.sh).
  setsid nsenter --net="/run/netns/$node_netns" \
    unshare --mount --propagation slave \
    bash "$node_node_sources/node-init.sh" "$dir" "$bin" "$node_cgroup" \
    </dev/null >"$node/init.log" 2>&1 &
  echo $! >"$dir/node-init.pid"
  local deadline=$((SECONDS + start_timeout))
  until [[ -S $node/run/containerd/containerd.sock ]] && node_ctr "$dir" version >/dev/null 2>&1; do
    alive "$dir/node-init.pid" || { tail -n 5 "$node/init.log" >&2; die "the node's init exited (log: $node/init.log)"; }
    ((SECONDS < deadline)) || die "containerd not ready after ${start_timeout}s (log: $node/containerd.log)"
    sleep 0.1
  done
  node_images "$dir"

  local kubeconfig_file name
  for name in kube-controller-manager kube-scheduler; do
    kubeconfig_file=$dir/$name.kubeconfig
    kubeconfig "$dir" "$kubeconfig_file" "https://127.0.0.1:$api_port" "$name"
  done
  setsid "$bin/kube-controller-manager" --kubeconfig "$dir/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "$dir/kube-controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --cluster-signing-cert-file "$dir/pki/ca.crt" --cluster-signing-key-file "$dir/pki/ca.key" \
    --controllers "*" --flex-volume-plugin-dir "$node/volume-plugins" \
    </dev/null >"$dir/kube-controller-manager.log" 2>&1 &
  echo $! >"$dir/kube-controller-manager.pid"
  setsid "$bin/kube-scheduler" --kubeconfig "$dir/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/kube-scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false \
    </dev/null >"$dir/kube-scheduler.log" 2>&1 &
  echo $! >"$dir/kube-scheduler.pid"

  local kubectl=(kubectl --kubeconfig "$dir/kubeconfig")
  deadline=$((SECONDS + start_timeout))
  until [[ $("${kubectl[@]}" get node "$node_name" -o \
    jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]] &&
    "${kubectl[@]}" get serviceaccount default -n default >/dev/null 2>&1; do
    for name in node-init kube-controller-manager kube-scheduler; do
      alive "$dir/$name.pid" || die "$name exited during start-up (logs: $dir/*.log, $node/*.log)"
    done
    ((SECONDS < deadline)) || die "the node was not Ready after ${start_timeout}s (logs: $node/kubelet.log, $node/containerd.log)"
    sleep 0.2
  done
}

# node_stop DIR: everything the node started or changed on the host, gone. Runs when nothing
# of it exists too.
node_stop() {
  local dir=$1 name
  for name in kube-scheduler kube-controller-manager; do
    stop_pidfile "$dir/$name.pid"
  done
  # Every process of the node is in its cgroup: the init, containerd and its shims, the
  # kubelet, and the pods. Killed until none is left (a dying shim may start nothing new:
  # the kubelet goes in the same sweep).
  local procs=/sys/fs/cgroup/pids/$node_cgroup i pids
  for ((i = 0; i < 100; i++)); do
    pids=$(find "$procs" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
    [[ -z $pids ]] && break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.05
  done
  [[ -z ${pids:-} ]] || die "processes of the node would not die: $pids"
  rm -f "$dir/node-init.pid"
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/; do
    [[ -d $hierarchy$node_cgroup ]] || continue
    find "$hierarchy$node_cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ ! -d $hierarchy$node_cgroup ]] || die "could not remove the cgroup $hierarchy$node_cgroup"
  done
  if iptables -w -t nat -C PREROUTING -i "$node_host_if" -j "$node_nat_chain" 2>/dev/null; then
    iptables -w -t nat -D PREROUTING -i "$node_host_if" -j "$node_nat_chain"
  fi
  if iptables -w -t nat -L "$node_nat_chain" -n >/dev/null 2>&1; then
    iptables -w -t nat -F "$node_nat_chain"
    iptables -w -t nat -X "$node_nat_chain"
  fi
  # The namespace takes the veth pair, with it the route to the pods, and the bridge.
  if node_running; then
    ip netns delete "$node_netns"
  fi
  if [[ -f $cache/node/made-run-netns && -z $(ip netns list 2>/dev/null) ]]; then
    umount /run/netns 2>/dev/null || true
    rmdir /run/netns 2>/dev/null || true
    rm -f "$cache/node/made-run-netns"
  fi
  if node_owned_by "$dir"; then
    rm -f "$(node_owner_file)"
  fi
}
