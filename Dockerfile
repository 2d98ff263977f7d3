# orqest/agent-runtime — the container image of the agent runtime (package
# agent, the binary orqest-agent-runtime) that tier 2 (plugins/docker) and the
# kubernetes backend (plugins/kubernetes) run.
#
# The build context is the repository root; .dockerignore admits only the runtime
# binary below (it embeds the rules table) and the fork-server's C loop. Build
# both first (`make runtime forkcore`):
#
#   CGO_ENABLED=0 go build -o bin/orqest-agent-runtime ./cmd/orqest-agent-runtime
#   make forkcore
#
# then, on a machine with no registry (`make image` does all of this):
#
#   scripts/build-base-image.sh     # debootstraps orqest/python-base:bookworm
#   docker build -t orqest/agent-runtime:0.1.0 .
#
# and anywhere a registry is reachable:
#
#   docker build --build-arg BASE_IMAGE=python:3.11-slim -t orqest/agent-runtime:0.1.0 .
#
# The base only has to provide python3 (as /usr/bin/python3 or
# /usr/local/bin/python3) with its venv module (Debian: python3-venv; the
# per-agent virtual environments) and /bin/sh for the RUN step.
ARG BASE_IMAGE=orqest/python-base:bookworm
FROM ${BASE_IMAGE}

ARG ORQEST_VERSION=0.1.0
LABEL org.opencontainers.image.title="orqest agent runtime" \
      org.opencontainers.image.description="tier-2 in-container MCP runtime for orqest-sandbox" \
      org.opencontainers.image.version="${ORQEST_VERSION}"

COPY bin/orqest-agent-runtime /usr/local/bin/orqest-agent-runtime
# The fork-server's C loop (runner/forkcore, built against Debian's Python
# 3.11 headers by `make forkcore`): the runtime hands it to its zygotes. A
# Python of another major.minor refuses it and loops in Python.
COPY bin/orqest-forkcore.so /usr/local/lib/orqest/orqest-forkcore.so

# /data is the mount point of the per-user named volume: a fresh volume copies
# this directory's ownership and mode, so only the runtime (root, see below)
# can enter it. /workspace is a tmpfs at run time (root, 0711: the Python
# children, uid 65534, may traverse it to their agent's venv). Both smoke
# checks run here so a broken base fails the build.
RUN mkdir -p /data /workspace \
 && chown 0:0 /data /workspace \
 && chmod 0700 /data \
 && chmod 0711 /workspace \
 && chmod 0755 /usr/local/bin/orqest-agent-runtime \
 && chmod 0644 /usr/local/lib/orqest/orqest-forkcore.so \
 && /usr/local/bin/orqest-agent-runtime -version \
 && (test -x /usr/bin/python3 || test -x /usr/local/bin/python3) \
 && python3 -I -S -B -c 'import json, resource; print("python ok")' \
 && python3 -I -c 'import venv; print("venv ok")' \
 && if python3 -c 'import matplotlib' 2>/dev/null; then \
      mkdir -p /opt/orqest/matplotlib \
      && MPLCONFIGDIR=/opt/orqest/matplotlib MPLBACKEND=agg python3 -c 'import matplotlib.pyplot; print("matplotlib font cache ok")' \
      && chmod -R a+rX /opt/orqest/matplotlib; \
    fi

# /opt/orqest/matplotlib (data-science variant): matplotlib's font cache,
# built here because sandboxed code may not walk the font directories; the
# runtime copies it into each session's workspace (.matplotlib).

# The runtime runs as root with every capability dropped but CHOWN, KILL, SETUID
# and SETGID (the plugin's --cap-drop ALL --cap-add ..., no-new-privileges); the
# runner drops every Python process to 65534:65534 before any user code runs.
USER 0:0
WORKDIR /workspace
ENTRYPOINT ["/usr/local/bin/orqest-agent-runtime"]
