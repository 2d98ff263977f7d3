#!/usr/bin/env bash
# Cut a release: `make release VERSION=x.y.z` (or scripts/release.sh x.y.z).
#
# Refuses unless the tree is clean and CHANGELOG.md has a dated section
# "## [x.y.z] - YYYY-MM-DD" with its link; then builds the binaries with the
# version stamped in (make build, make runtime), packs them with SHA256SUMS and
# the plugin catalog lines an operator pastes into a policy
# (dist/orqest-sandbox-x.y.z-linux-ARCH.tar.gz), the Python client's wheel
# beside it (dist/orqest_sandbox-x.y.z-py3-none-any.whl), and creates the annotated
# tag vx.y.z. Pushing the tag and the tarball is left to the maintainer.
#
#   RELEASE_CHECK_ONLY=1  only the checks (no build, no tag)
#   RELEASE_NO_TAG=1      build the tarball but do not tag
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-}"
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]]; then
	echo "release: want a semantic version, e.g. scripts/release.sh 0.2.0 (got '${version}')" >&2
	exit 2
fi
tag="v$version"

if ! grep -Eq "^## \[$version\] - [0-9]{4}-[0-9]{2}-[0-9]{2}\$" CHANGELOG.md; then
	echo "release: CHANGELOG.md has no section '## [$version] - YYYY-MM-DD': move the [Unreleased] entries under it first" >&2
	exit 1
fi
if ! grep -Fq "[$version]: " CHANGELOG.md; then
	echo "release: CHANGELOG.md has no link line '[$version]: ...'" >&2
	exit 1
fi
if [ -n "$(git status --porcelain)" ]; then
	echo "release: the working tree has uncommitted changes; a release is built from a commit" >&2
	exit 1
fi
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
	echo "release: tag $tag exists already (at $(git rev-parse --short "$tag^{commit}"))" >&2
	exit 1
fi
if [ "${RELEASE_CHECK_ONLY:-}" = 1 ]; then
	echo "release: $tag passes the checks"
	exit 0
fi

arch="$(go env GOARCH)"
name="orqest-sandbox-$version-linux-$arch"
out="dist/$name"
rm -rf "$out" "$out.tar.gz"
make --no-print-directory build runtime VERSION="$version" BIN="$PWD/$out/bin"
cp LICENSE README.md CHANGELOG.md SECURITY.md "$out/"
(cd "$out/bin" && sha256sum -- * >../SHA256SUMS)
{
	echo "# plugin catalog entries for $tag (paste into a policy's plugin blocks)"
	for p in "$out"/bin/orqest-sandbox-plugin-*; do
		n="${p##*/orqest-sandbox-plugin-}"
		printf 'plugin "%s" { sha256 = "%s" }\n' "$n" "$(sha256sum "$p" | cut -d' ' -f1)"
	done
} >"$out/catalog.hcl"
tar -C dist -czf "$out.tar.gz" "$name"
rm -rf "$out"
echo "release: built $out.tar.gz ($(sha256sum "$out.tar.gz" | cut -d' ' -f1))"
# The Python client's wheel beside the tarball (built offline, Debian's setuptools).
whl="dist/orqest_sandbox-$version-py3-none-any.whl"
rm -f "$whl"
make --no-print-directory python-client VERSION="$version" PY_DIST="$PWD/dist"
echo "release: built $whl ($(sha256sum "$whl" | cut -d' ' -f1))"

if [ "${RELEASE_NO_TAG:-}" = 1 ]; then
	exit 0
fi
git tag -a "$tag" -m "orqest-sandbox $version"
echo "release: tagged $tag at $(git rev-parse --short HEAD); push it with: git push origin $tag"
