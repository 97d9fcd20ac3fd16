#!/bin/sh
# Copies the shared libraries (and the dynamic loader) the given programs
# load into DIR: the host's /.deskbox/lib for stored images (docs/images.md).
# Usage: image-libs.sh DIR PROGRAM...
set -eu
dir="$1"
shift
rm -rf "$dir"
mkdir -p "$dir"
for prog in "$@"; do
	ldd "$prog" | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]*ld-linux/ { print $1 }'
done | sort -u | while read -r lib; do
	cp -L "$lib" "$dir/$(basename "$lib")"
done
chmod -R a+rX "$dir"
