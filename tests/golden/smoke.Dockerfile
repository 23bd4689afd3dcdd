# Rendered by build.py from images/smoke.yaml, variant smoke. Do not edit: change the spec or the template.
FROM miles-base:bookworm-minbase-py311-git
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The build's clock (the spec's source_date_epoch, also passed as the build arg BuildKit reads): every step sees it, so
# pip and compileall write hash-checked .pyc files, and the exporter clamps every file time of the layers to it.
ARG SOURCE_DATE_EPOCH=1787049764

ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
RUN --mount=type=bind,from=miles-wheelhouse:smoke-8512eb121316b581,target=/tmp/wheelhouse \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt \
    setuptools \
    torch \
    triton \
    transformers


# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it. The host's CA
# ---- bundle is mounted as a secret on every family (offline ones too), so every build proves it never lands in a layer.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca --mount=type=bind,from=miles-wheelhouse:smoke-8512eb121316b581,target=/tmp/wheelhouse \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    /opt/venv/bin/python -m pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt --no-deps --no-build-isolation /tmp/sglang-attn-bridge \
    && test "$(/opt/venv/bin/python -c 'import importlib.metadata as m, sys; print(sys.implementation.name, m.version("sglang-attn-bridge"))')" = 'cpython 0.2.0'

# ---- Gates: verify/ runs with the image's own python against this target's gate list (gates/gates.json).
# ---- Any failing check fails the build, so no tag ever points at an image that does not import. Nothing after
# ---- this step may change how the image behaves (labels only). `--json -` puts the runner's report into the build
# ---- log as one line, and the same line is kept in the image: the toolkit reads each check's outcome from it, and
# ---- refuses a build whose report is missing, lacks this build's nonce (the build arg, derived from the input
# ---- hash: only this step reads it, and a cached gate layer keeps a report of the same input) or a declared gate.
# ---- The runner runs only on a CPython 3; a `python` that runs no runner writes no report and fails the step here.
# ---- The runner itself writes no .pyc of what it imports and a report without times; what an imported package
# ---- writes at import (a temp folder, a cache) still lands in this layer.
ARG MILES_GATE_NONCE
RUN --mount=type=bind,source=gates,target=/tmp/gates \
    mkdir -p /usr/share/miles-gates && cd /tmp/gates \
    && PYTHONDONTWRITEBYTECODE=1 /opt/venv/bin/python -m verify --config gates.json --nonce "${MILES_GATE_NONCE}" --json - --json-line /usr/share/miles-gates/report.json \
    && grep -q "\"nonce\":\"${MILES_GATE_NONCE}\"" /usr/share/miles-gates/report.json

LABEL org.opencontainers.image.title="miles" \
      org.opencontainers.image.base.name="miles-base:bookworm-minbase-py311-git" \
      io.miles.variant="smoke" \
      io.miles.spec-digest="74d86ed7c4dc449bbb3e960c3f7e0d3993a4d2e8144810bfc1acc32f38eeb649"
