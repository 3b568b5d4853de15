#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install what paddock needs to build, run, test and bench on Debian 12, and create
# the unprivileged `paddock` user. Idempotent: does nothing when all is in place.
set -euo pipefail

packages=(
	# build
	build-essential cmake pkg-config clang-format
	libfcgi-dev libjson-c-dev libsqlite3-dev libnl-3-dev libnl-route-3-dev libseccomp-dev libsystemd-dev libcurl4-openssl-dev
	# run: the front door and the runtimes a session starts
	nginx-light python3 bash nodejs
	# the code plane's kernel tier: IPython in the sandbox, inline figures, DataFrames
	python3-ipython python3-ipykernel python3-matplotlib python3-pandas
	# the endpoint tier: the bridge's websocket client; the test's Jupyter Server
	python3-websocket python3-jupyter-server
	# tests, benches and the README walk-through
	python3-pytest python3-requests python3-jsonschema python3-yaml curl procps
	# make bench: load generator, plots, instruction counts
	wrk python3-matplotlib valgrind
	# make fuzz: clang with libFuzzer and the sanitizer runtimes
	clang libclang-rt-14-dev
	# make deb, make rpm and their tests: packaging tools, unit checks, certificates
	debhelper dpkg-dev devscripts lintian fakeroot rpm rpmlint cpio openssl systemd adduser
	# the system test: Debian root filesystems, a container and a VM booted with systemd,
	# their disk image, and the HAProxy front of the two-node test
	mmdebstrap systemd-container qemu-system-x86 e2fsprogs haproxy
)
# the package set sessions' code expects: the Debian names in packaging/package-set (the
# .deb recommends the same), since sessions see this host's /usr
mapfile -t package_set < <(awk '/^[^#]/ && $4 != "-" { print $4 }' \
	"$(dirname "$0")/../packaging/package-set")
packages+=("${package_set[@]}")

if [ "$(id -u)" -ne 0 ]; then
	echo "deps.sh: run as root (it installs packages and creates a system user)" >&2
	exit 1
fi

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$status" in
	*"ok installed") ;;
	*) missing+=("$p") ;;
	esac
done

if [ "${#missing[@]}" -gt 0 ]; then
	echo "deps.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# Refresh the package lists only when an install is needed and they look stale
	# (empty, or older than a day); retry the install once after a refresh.
	lists=/var/lib/apt/lists
	if [ -z "$(find "$lists" -maxdepth 1 -name '*Packages*' -mmin -1440 -print -quit 2>/dev/null)" ]; then
		apt-get update -q
	fi
	if ! apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; then
		apt-get update -q
		apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
	fi
fi

if ! getent group paddock >/dev/null; then
	groupadd --system paddock
fi
if ! getent passwd paddock >/dev/null; then
	useradd --system --gid paddock --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin paddock
fi

# The MCP test clients (the official SDK and the Inspector's CLI), from the npm registry at
# the versions tests/mcp/package-lock.json pins. Debian's nodejs comes without npm; a
# Node.js that bundles it already has it.
if ! command -v npm >/dev/null; then
	echo "deps.sh: installing npm"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm </dev/null
fi
mcp_dir="$(dirname "$0")/../tests/mcp"
if ! cmp -s "$mcp_dir/package-lock.json" "$mcp_dir/node_modules/.paddock-lock"; then
	echo "deps.sh: installing the MCP test clients (npm ci)"
	# No install scripts: the clients run as they are unpacked.
	(cd "$mcp_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
	cp "$mcp_dir/package-lock.json" "$mcp_dir/node_modules/.paddock-lock"
fi
