#!/bin/sh
# Installs the Debian packages deskbox needs to build and run it; with
# --test also those only its tests and bench use (the Python test modules,
# ImageMagick, npm and the node projects under tests/).  `make run` runs it
# without --test, `make test`, `make check` and `make bench` with it.
# Idempotent: does nothing (and needs no network) when all are present.
set -eu

TEST=0
for a in "$@"; do
	case "$a" in
	--test) TEST=1 ;;
	*)
		echo "usage: $0 [--test]" >&2
		exit 2
		;;
	esac
done

PKGS="build-essential pkg-config
libmicrohttpd-dev libcjson-dev libvncserver-dev libpng-dev libjpeg62-turbo-dev libwebp-dev zlib1g-dev libxdo-dev
libseccomp-dev libcap-dev nettle-dev libarchive-dev libarchive-tools libcurl4-openssl-dev libx11-dev libxext-dev libxdamage-dev libxfixes-dev libxtst-dev
crun xvfb openbox x11vnc novnc xterm xfonts-base x11-apps xdotool x11-utils x11-xserver-utils
fonts-wqy-microhei fonts-noto-core fonts-noto-color-emoji python3 python3-venv python3-pip python3-matplotlib procps iproute2 util-linux e2fsprogs curl openssl
shared-mime-info less
xfsprogs
nftables dnsmasq-base libnftables-dev libmnl-dev
libgnutls28-dev libhttp-parser-dev libnss3-tools
umoci skopeo debootstrap
chromium
libavcodec-dev libavformat-dev libswscale-dev
dbus-daemon at-spi2-core python3-pyatspi gir1.2-atspi-2.0 python3-dbus
qemu-system-x86 linux-image-amd64 busybox-static cpio
scrot xfwm4 xfdesktop4 xfce4-session dbus-x11 libgtk-3-bin"
# Fonts: the default image uses the host's, so its desktop shows every
# script (Noto: Arabic, Devanagari, Thai, Hebrew, ...; WenQuanYi: CJK) and
# colour emoji.
# pip (python3-pip): the default image's root (and sudo) installs wheels into
# the sandbox's own /usr/local with the host's pip (docs/security.md).
# What E2B's desktop SDK runs in a sandbox of the `desktop` template
# (contrib/templates/desktop.json, docs/compat.md): scrot, XFCE's xfwm4,
# xfdesktop and session (with dbus-launch), gtk-launch.
# code_run's "node" runs the host's node: Debian's when none is on the PATH.
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"

# Only the tests and the bench: test_openapi*.py (yaml, jsonschema,
# hypothesis), the bench's naive tools (ImageMagick's import and convert),
# ffprobe for the recordings' tests, zenity for the accessibility test's
# dialog, and npm for the node projects below.
if [ "$TEST" = 1 ]; then
	PKGS="$PKGS python3-yaml python3-jsonschema python3-hypothesis imagemagick ffmpeg zenity"
	# The cluster tests' etcd (a cluster node needs only its address).
	PKGS="$PKGS etcd-server"
	command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
fi

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
	n=$(echo $missing | wc -w)
	echo "install-deps: installing $n Debian packages (apt-get, about a minute on a fresh machine):$missing"
	export DEBIAN_FRONTEND=noninteractive
	echo "install-deps: apt-get update"
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
	echo "install-deps: Debian packages installed"
fi

[ "$TEST" = 1 ] || exit 0

# The node tests' packages, exactly as each package-lock.json pins them:
# playwright-core for tests/browser, the MCP SDK client for tests/mcp,
# @apidevtools/swagger-parser for tests/openapi (test_openapi.py validates
# docs/openapi.yaml with it).
# Again only when missing or the lock file changed.
npm_ci() {
	dir="$(dirname "$0")/../tests/$1"
	if [ ! -d "$dir/node_modules/$2" ] ||
		[ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		echo "install-deps: npm ci in tests/$1 (test-only node packages, can take minutes)"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	fi
}
npm_ci browser playwright-core
npm_ci mcp @modelcontextprotocol/sdk
npm_ci openapi @apidevtools/swagger-parser
# kubernetes-models for tests/k8s (test_k8s.py validates contrib/k8s with it).
npm_ci k8s kubernetes-models
# The compatibility front-ends' official clients (docs/compat.md).
npm_ci compat-daytona @daytonaio/sdk
npm_ci compat-sprites @fly/sprites
npm_ci compat-opensandbox @alibaba-group/opensandbox
npm_ci compat-e2b e2b
