# Rendered by build.py from images/miles-cpu.yaml, variant miles-cpu. Do not edit: change the spec or the template.
FROM miles-base:bookworm-minbase-py311-git
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# ---- Python: a venv filled offline from the wheelhouse image (the family's closed pin set and its constraints.txt),
# ---- bind-mounted per step: no network, no wheel in a layer or in the build context.
ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
# ---- The family's `pip` pins, then its `pip_no_deps` pins without their dependencies (sglang's metadata pins its
# ---- CUDA serving stack).
RUN --mount=type=bind,from=miles-wheelhouse:miles-cpu-e200b75cf8a99fa8,target=/tmp/wheelhouse \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt \
        apache-tvm-ffi==0.1.11 \
        blobfile==3.0.0 \
        ipython==9.18.1 \
        msgspec==0.23.0 \
        openai==2.6.1 \
        partial-json-parser==0.2.1.1.post7 \
        pytest==9.2.0 \
        pyzmq==27.3.0 \
        setuptools==80.9.0 \
        torch==2.13.0+cpu \
        triton==3.9.0 \
        wheel==0.48.0 \
        xgrammar==0.2.7 \
    && pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt --no-deps sglang==0.5.22

# ---- miles as the GPU images install it, offline from the pin set (setuptools and wheel are in the venv).
# ---- miles' requirements.txt, read from its source (the pinned commit, or a local `--source`; only that file, so a
# ---- change elsewhere in miles keeps this layer), less the spec's `exclude` names (image_tools/requirements.py).
# ---- The apt copy of PyJWT has no pip record, so pip could not replace it: it goes first, as upstream does.
RUN --mount=type=bind,from=miles-wheelhouse:miles-cpu-e200b75cf8a99fa8,target=/tmp/wheelhouse --mount=type=bind,from=src-miles,source=requirements.txt,target=/tmp/miles-requirements.txt \
    --mount=type=bind,source=tools,target=/tmp/tools --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    rm -rf /usr/lib/python3/dist-packages/jwt /usr/lib/python3/dist-packages/PyJWT* && \
    /opt/venv/bin/python /tmp/tools/requirements.py /tmp/miles-requirements.txt --exclude nvidia-resiliency-ext >/tmp/requirements.txt && \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt --no-build-isolation -r /tmp/requirements.txt && \
    rm /tmp/requirements.txt
# ---- miles itself, as an editable install of its own source tree, wired to the bridge by the spec's
# ---- full-context patches for the miles component.
COPY --from=src-miles / /root/miles
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    git -C /root/miles apply --check -p1 /tmp/patches/miles-attn-bridge.patch && \
    git -C /root/miles apply -p1 /tmp/patches/miles-attn-bridge.patch && \
    git -C /root/miles apply --reverse --check -p1 /tmp/patches/miles-attn-bridge.patch
RUN --mount=type=bind,from=miles-wheelhouse:miles-cpu-e200b75cf8a99fa8,target=/tmp/wheelhouse --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt --no-build-isolation -e /root/miles --no-deps

# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca --mount=type=bind,from=miles-wheelhouse:miles-cpu-e200b75cf8a99fa8,target=/tmp/wheelhouse \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    /opt/venv/bin/python -m pip install --no-cache-dir --no-deps --no-build-isolation --no-index --find-links /tmp/wheelhouse /tmp/sglang-attn-bridge

WORKDIR /root/miles
# ---- Gates: verify/ runs with the image's own python against this target's gate list (gates/gates.json).
# ---- Any failing check fails the build, so no tag ever points at an image that does not import. Nothing after
# ---- this step may change how the image behaves (labels only).
RUN --mount=type=bind,source=gates,target=/tmp/gates \
    cd /tmp/gates && /opt/venv/bin/python -m verify --config gates.json

LABEL org.opencontainers.image.title="miles" \
      org.opencontainers.image.base.name="miles-base:bookworm-minbase-py311-git" \
      io.miles.variant="miles-cpu" \
      io.miles.spec-digest="94f833c9e1df0fa0e1263d0bb30ee105805920dc411542917a032f474aee93bc"
