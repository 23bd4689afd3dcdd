# Rendered by build.py from images/smoke.yaml, variant smoke. Do not edit: change the spec or the template.
FROM miles-base:bookworm-minbase-py311-git
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# ---- Python: a venv filled from the host-prepared wheelhouse (a local image named by its recipe), bind-mounted for
# ---- this step only: no network, no wheel in a layer, no wheel in the build context.
ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
RUN --mount=type=bind,from=miles-wheelhouse:smoke-f63abcf47ff653e7,target=/tmp/wheelhouse \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse \
        setuptools==80.9.0 \
        torch==2.13.0 \
        transformers==5.24.0 \
        triton==3.9.0

# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca --mount=type=bind,from=miles-wheelhouse:smoke-f63abcf47ff653e7,target=/tmp/wheelhouse \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    /opt/venv/bin/python -m pip install --no-cache-dir --no-deps --no-build-isolation --no-index --find-links /tmp/wheelhouse /tmp/sglang-attn-bridge

# ---- Gates: verify/ runs with the image's own python against this target's gate list (gates/gates.json).
# ---- Any failing check fails the build, so no tag ever points at an image that does not import. Nothing after
# ---- this step may change how the image behaves (labels only).
RUN --mount=type=bind,source=gates,target=/tmp/gates \
    cd /tmp/gates && /opt/venv/bin/python -m verify --config gates.json

LABEL org.opencontainers.image.title="miles" \
      org.opencontainers.image.base.name="miles-base:bookworm-minbase-py311-git" \
      io.miles.variant="smoke" \
      io.miles.spec-digest="50c29a01d0925ba1d4c5b7312bcd50cd6e89e281cfb808f22312f90e3372a858"
