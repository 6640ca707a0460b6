#!/usr/bin/env bash
# The node's init, started by scripts/kube-up.sh --node in the node's network namespace and
# a mount namespace of its own (unshare --propagation slave: the host's mounts reach in,
# none made here reaches out). It joins the node's cgroup, so that everything it starts —
# containerd, its shims, the kubelet, the pods — can be found and ended by teardown; lays
# folders of DIR/node over the paths containerd and the kubelet write to without asking;
# then starts containerd and the kubelet and stays until they end.
# Usage: node-init.sh DIR KUBE_BIN CGROUP
set -euo pipefail
dir=$1 bin=$2 cgroup=$3 node=$1/node

# In every cgroup v1 hierarchy (cpuset needs its cpus and mems before a process may join).
for hierarchy in /sys/fs/cgroup/*/; do
  [[ -f ${hierarchy}cgroup.procs ]] || continue
  mkdir -p "$hierarchy$cgroup"
  if [[ -f ${hierarchy}cpuset.cpus ]]; then
    cat "${hierarchy}cpuset.cpus" >"$hierarchy$cgroup/cpuset.cpus"
    cat "${hierarchy}cpuset.mems" >"$hierarchy$cgroup/cpuset.mems"
  fi
  echo $$ >"$hierarchy$cgroup/cgroup.procs"
done

# /run (containerd's state and the shims' sockets, the pods' network namespaces), /var/lib
# (the kubelet's root folder, the CNI's address leases and cache) and /var/log (the pods'
# logs) are DIR/node's here. The kubelet keeps its default root, /var/lib/kubelet: its
# sockets there must fit a unix socket's 108 bytes, which a path under DIR need not.
mount --bind "$node/run" /run
mount --bind "$node/var-lib" /var/lib
mount --bind "$node/log" /var/log
# The kubelet sets these kernel settings for the whole machine when they differ from what
# it wants; here it writes files instead.
for setting in kernel/panic kernel/panic_on_oops vm/overcommit_memory vm/panic_on_oom \
  kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
  file=$node/sysctl/${setting//\//.}
  cat "/proc/sys/$setting" >"$file"
  mount --bind "$file" "/proc/sys/$setting"
done

containerd --config "$node/containerd.toml" --log-level warn >"$node/containerd.log" 2>&1 &
for ((i = 0; i < 300; i++)); do
  [[ -S /run/containerd/containerd.sock ]] && break
  sleep 0.1
done

"$bin/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$node/kubelet.kubeconfig" \
  --hostname-override certctl-node --node-ip "$(
    ip -4 -o addr show dev eth0 | awk '{split($4, a, "/"); print a[1]; exit}'
  )" --v 1 >"$node/kubelet.log" 2>&1 &
wait -n
echo "node-init: containerd or the kubelet exited; the node is down (logs: $node)" >&2
