#!/usr/bin/env bash
# The two base images `make image` builds on when it may not pull from a registry
# (IMAGE_BASES=debian, the default; docs/maintainers/releases.md, "The image"), made from Debian bookworm's
# packages with mmdebstrap and stored in buildah's local storage:
#
#   BUILD_NAME    the build stage's base: Debian's minbase variant, which is what the release's
#                 debian:bookworm-slim is (the Dockerfile then apt-gets python3-venv in both);
#   RUNTIME_NAME  the runtime stage's base: the Debian packages Google's distroless
#                 python3-debian12 is made of (its base, cc and python3 package lists), extracted
#                 as distroless extracts them (no maintainer script runs, no shell, no package
#                 manager), with its /usr/bin/python3 alias, CA bundle, /tmp and environment.
#                 One difference on purpose: /etc/passwd has root and nobody but no `nonroot`
#                 (65532), so the smoke test runs the chart's uid without a passwd entry.
#
# usage: scripts/debian_bases.sh ARCH BUILD_NAME RUNTIME_NAME   (as root; ARCH: amd64 | arm64)
set -euo pipefail

SUITE=bookworm
# distroless: static (base-files netbase tzdata media-types ca-certificates), base (libc6
# libssl3), cc (libgomp1 libstdc++6 libgcc-s1 gcc-12-base) and python3 for debian12.
RUNTIME_PACKAGES="base-files netbase tzdata media-types ca-certificates libc6 libssl3
  libgomp1 libstdc++6 libgcc-s1 gcc-12-base
  libbz2-1.0 libdb5.3 libexpat1 liblzma5 libsqlite3-0 libuuid1 libncursesw6 libtinfo6
  python3-distutils zlib1g libcom-err2 libcrypt1 libgssapi-krb5-2 libk5crypto3 libkeyutils1
  libkrb5-3 libkrb5support0 libnsl2 libreadline8 libtirpc3 libffi8 libpython3.11-minimal
  libpython3.11-stdlib python3.11-minimal"

# Hook mode (mmdebstrap runs this script again as its extract hook): download exactly the
# listed packages, without their dependencies, and unpack them into the new root $2.
if [ "${1:-}" = "--extract-into" ]; then
    debs=$(mktemp -d)
    # shellcheck disable=SC2086 # the list is word-split on purpose
    (cd "$debs" && APT_CONFIG=$MMDEBSTRAP_APT_CONFIG apt-get download -q \
        -o APT::Sandbox::User=root $RUNTIME_PACKAGES)
    for deb in "$debs"/*.deb; do dpkg-deb --extract "$deb" "$2"; done
    rm -rf "$debs"
    exit 0
fi

arch=$1 build_name=$2 runtime_name=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

commit() { # ROOTFS NAME [buildah config options...]: a one-layer image from a tarball or folder
    local rootfs=$1 name=$2 ctr
    shift 2
    ctr=$(buildah from scratch)
    buildah add --quiet "$ctr" "$rootfs" /
    buildah config --os linux --arch "$arch" "$@" "$ctr"
    buildah commit --quiet --rm "$ctr" "$name" >/dev/null
    echo "base image $name"
}

mmdebstrap --quiet --arch="$arch" --variant=minbase "$SUITE" "$work/build.tar"
commit "$work/build.tar" "$build_name" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash

root=$work/runtime
mmdebstrap --quiet --arch="$arch" --variant=extract --skip=chroot/mount \
    --extract-hook="\"$(realpath "$0")\" --extract-into \"\$1\"" "$SUITE" "$root"
# What mmdebstrap leaves for itself and the package manager: distroless has none of it (the
# container runtime provides /dev, /etc/hostname and /etc/resolv.conf).
rm -rf "$root"/etc/apt "$root"/etc/dpkg "$root"/var/lib/dpkg "$root"/var/lib/apt \
    "$root"/var/cache/apt "$root"/var/log/apt "$root"/etc/hostname "$root"/etc/resolv.conf
find "$root/dev" -mindepth 1 -delete
ln -s python3.11 "$root/usr/bin/python3"
ln -s python3.11 "$root/usr/bin/python"
chmod 1777 "$root/tmp"
# update-ca-certificates' bundle, as distroless builds it: every certificate, in order.
find "$root/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | xargs cat \
    >"$root/etc/ssl/certs/ca-certificates.crt"
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
    'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'tty:x:5:' 'staff:x:50:' 'nobody:x:65534:' >"$root/etc/group"
printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$root/etc/nsswitch.conf"
commit "$root" "$runtime_name" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt --env LANG=C.UTF-8 \
    --user 0 --workingdir / --entrypoint '["/usr/bin/python3.11"]'
