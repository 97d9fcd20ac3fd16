#!/bin/sh
# Installs every Debian package deskbox needs to build, run and test.
# Idempotent: does nothing (and needs no network) when all are present.
set -eu

PKGS="build-essential pkg-config
libmicrohttpd-dev libcjson-dev libvncserver-dev libpng-dev zlib1g-dev libxdo-dev
libseccomp-dev libcap-dev libx11-dev
crun xvfb openbox x11vnc novnc xterm xfonts-base x11-apps xdotool x11-utils x11-xserver-utils
fonts-wqy-microhei python3 imagemagick procps iproute2 util-linux curl"

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
