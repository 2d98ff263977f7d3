#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need and this machine
# lacks (as root, with apt-get), or prints the one command that does. Every
# entry point runs it first: `make demo`, `make test`, `make bench`, .ci/run.
#
#   python3          Debian's /usr/bin/python3: the interpreter every tier runs
#   gcc, make        the fork-server's C loop, tier 0's cgo
#   pkg-config, libpython3-dev   tier 0 embeds CPython (pkg-config python3-embed)
#   uidmap           setuid newuidmap/newgidmap: a non-root plugin maps its
#                    children to a subordinate uid (and the test of it)
#   runsc            gVisor: tier 3 (plugins/gvisor) runs each call in a
#                    fresh runsc sandbox
#   python3-setuptools, python3-wheel   build the Python client's wheel offline
#                    (make python-client: setup.py bdist_wheel, nothing from the index)
#   python3-venv     the Python client's install test (a venv, pip from Debian's wheels)
#   debootstrap      the tier-2 base image is assembled from Debian packages
#                    (no registry); only `make test`/`make bench` (SETUP_IMAGE=1)
set -euo pipefail

need=()
[ -x /usr/bin/python3 ] || need+=(python3)
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v pkg-config >/dev/null || need+=(pkg-config)
pkg-config --exists python3-embed 2>/dev/null || need+=(libpython3-dev)
/usr/bin/python3 -c 'import setuptools' 2>/dev/null || need+=(python3-setuptools)
/usr/bin/python3 -c 'import wheel' 2>/dev/null || need+=(python3-wheel)
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
[ -x /usr/bin/newuidmap ] && [ -x /usr/bin/newgidmap ] || need+=(uidmap)
command -v runsc >/dev/null || [ -x /usr/bin/runsc ] || need+=(runsc)
if [ "${SETUP_IMAGE:-0}" = 1 ]; then
	command -v debootstrap >/dev/null || need+=(debootstrap)
fi
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
	echo "setup: missing ${need[*]}; install them with:" >&2
	echo "  sudo apt-get install -y ${need[*]}" >&2
	exit 1
fi
echo "setup: installing ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
