#!/bin/sh
# Installs every Debian package deskbox needs to build, run and test.
# Idempotent: does nothing (and needs no network) when all are present.
set -eu

PKGS="build-essential pkg-config
libmicrohttpd-dev libcjson-dev libvncserver-dev libpng-dev libjpeg62-turbo-dev libwebp-dev zlib1g-dev libxdo-dev
libseccomp-dev libcap-dev nettle-dev libarchive-dev libarchive-tools libcurl4-openssl-dev libx11-dev libxext-dev libxdamage-dev libxfixes-dev libxtst-dev
crun xvfb openbox x11vnc novnc xterm xfonts-base x11-apps xdotool x11-utils x11-xserver-utils
fonts-wqy-microhei python3 python3-venv python3-yaml python3-jsonschema python3-hypothesis imagemagick procps iproute2 util-linux e2fsprogs curl openssl
shared-mime-info less
xfsprogs
nftables dnsmasq-base libnftables-dev libmnl-dev
umoci skopeo debootstrap
chromium
qemu-system-x86 linux-image-amd64 busybox-static cpio"

# The browser tests' driver (tests/browser) runs on node; Debian's nodejs
# and npm are used only when no node is on the PATH already.
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -n "$missing" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "install-deps: missing packages:$missing (run as root to install)" >&2
		exit 1
	fi
	echo "install-deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
fi

# The node tests' packages, exactly as each package-lock.json pins them:
# playwright-core for tests/browser, the MCP SDK client for tests/mcp,
# @apidevtools/swagger-parser for tests/openapi (test_openapi.py validates
# docs/openapi.yaml with it).
# Again only when missing or the lock file changed.
npm_ci() {
	dir="$(dirname "$0")/../tests/$1"
	if [ ! -d "$dir/node_modules/$2" ] ||
		[ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		echo "install-deps: npm ci in tests/$1"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	fi
}
npm_ci browser playwright-core
npm_ci mcp @modelcontextprotocol/sdk
npm_ci openapi @apidevtools/swagger-parser
