#!/usr/bin/env bash
# build-base-image.sh — assemble the local Python base image for the tier-2
# runtime image WITHOUT any image registry.
#
# It debootstraps a minimal Debian rootfs (variant minbase + PACKAGES below) from the
# machine's own apt sources (the first URI in /etc/apt/sources.list{,.d}, or
# $ORQEST_DEBIAN_MIRROR), trims caches and docs, and `docker import`s it.
#
#   scripts/build-base-image.sh            # builds $ORQEST_BASE_IMAGE unless it is current
#   ORQEST_BASE_FORCE=1 scripts/build-base-image.sh   # rebuild even if it is current
#
# The image carries the label org.orqest.base.packages = a hash of PACKAGES
# (and the suite). An existing image whose label differs (an older package
# list) is rebuilt, so adding a package here is picked up by `make image`.
#
# Environment:
#   ORQEST_BASE_IMAGE    tag to build       (default orqest/python-base:bookworm)
#   ORQEST_DEBIAN_SUITE  Debian suite       (default: the host's codename, else bookworm)
#   ORQEST_DEBIAN_MIRROR apt mirror URI     (default: the host's own apt source)
#   ORQEST_BASE_FORCE    1 = rebuild even if the tag exists
#   ORQEST_BASE_EXTRA    more Debian packages, comma-separated (the
#                        data-science variant: python3-numpy,python3-pandas,
#                        python3-matplotlib; `make image-datascience`)
#
# Needs root (debootstrap) and debootstrap itself (apt-get install debootstrap).
# Elsewhere, skip this script and build the runtime image on a public base:
#   docker build --build-arg BASE_IMAGE=python:3.11-slim -t orqest/agent-runtime:0.1.0 .
set -euo pipefail

IMAGE="${ORQEST_BASE_IMAGE:-orqest/python-base:bookworm}"
step() { printf '==> [%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# The Debian packages of the base. python3-venv gives `python3 -m venv` (the
# per-agent virtual environments of the runtime; it is created with
# --without-pip, wheels are installed by the runtime itself). ca-certificates
# is the public TLS trust store that user code's HTTPS through a session's
# egress proxy verifies servers against (runner.TrustStorePaths).
PACKAGES="python3-minimal,python3,python3-venv,ca-certificates"
if [[ -n "${ORQEST_BASE_EXTRA:-}" ]]; then
	PACKAGES="$PACKAGES,$ORQEST_BASE_EXTRA"
fi

SUITE="${ORQEST_DEBIAN_SUITE:-}"
if [[ -z "$SUITE" ]]; then
	SUITE="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
	SUITE="${SUITE:-bookworm}"
fi
LABEL_KEY="org.orqest.base.packages"
WANT="$(printf '%s %s' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-16)"

if [[ "${ORQEST_BASE_FORCE:-0}" != 1 ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
	HAVE="$(docker image inspect -f "{{index .Config.Labels \"$LABEL_KEY\"}}" "$IMAGE" 2>/dev/null || true)"
	if [[ "$HAVE" == "$WANT" ]]; then
		step "base image $IMAGE is current ($LABEL_KEY=$WANT); skipping (ORQEST_BASE_FORCE=1 rebuilds)"
		exit 0
	fi
	step "base image $IMAGE has package-list hash '${HAVE:-none}', want $WANT ($PACKAGES): rebuilding"
fi

if ! command -v debootstrap >/dev/null 2>&1; then
	echo "build-base-image: debootstrap not found; install it with: apt-get install -y debootstrap" >&2
	exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "build-base-image: debootstrap needs root; run as root (or with sudo)" >&2
	exit 1
fi

MIRROR="${ORQEST_DEBIAN_MIRROR:-}"
if [[ -z "$MIRROR" ]]; then
	# deb822 sources (URIs: ...) first, then one-line sources (deb URI suite ...).
	MIRROR="$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
	if [[ -z "$MIRROR" ]]; then
		MIRROR="$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | grep -v security | awk '{for(i=2;i<=NF;i++) if ($i !~ /^\[/) {print $i; exit}}' | head -n1 || true)"
	fi
	MIRROR="${MIRROR:-http://deb.debian.org/debian}"
fi

WORK="$(mktemp -d /tmp/orqest-base.XXXXXX)"
ROOTFS="$WORK/rootfs"
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

start=$(date +%s)
step "debootstrap $SUITE (minbase + $PACKAGES) from $MIRROR into $ROOTFS"
# No --verbose: debootstrap prints one I: line per stage, which is the progress.
debootstrap --variant=minbase --include="$PACKAGES" \
	"$SUITE" "$ROOTFS" "$MIRROR" 2>&1 | sed -u 's/^/    /'

step "checking python3 in the rootfs"
chroot "$ROOTFS" /usr/bin/python3 -I -S -B -c 'import json, sys, venv; print("    python", sys.version.split()[0])'

step "trimming apt caches, docs, man pages, locales"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin \
	"$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* \
	"$ROOTFS"/usr/share/info/* "$ROOTFS"/var/log/*.log "$ROOTFS"/var/log/apt/* \
	"$ROOTFS"/tmp/* 2>/dev/null || true
find "$ROOTFS"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
find "$ROOTFS" -name '__pycache__' -type d -prune -exec rm -rf {} + 2>/dev/null || true
printf '    rootfs size: %s\n' "$(du -sh "$ROOTFS" | cut -f1)" >&2

step "docker import -> $IMAGE"
tar -C "$ROOTFS" --numeric-owner -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'CMD ["/usr/bin/python3"]' \
	--change "LABEL $LABEL_KEY=$WANT" \
	--message "orqest python base: debootstrap $SUITE minbase + $PACKAGES" \
	- "$IMAGE" >/dev/null

step "done in $(( $(date +%s) - start ))s: $(docker image inspect -f '{{.Id}} {{.Size}} bytes' "$IMAGE")"
