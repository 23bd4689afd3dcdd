# Rendered by build.py from images/miles-cpu.yaml, variant miles-cpu. Do not edit: change the spec or the template.
FROM miles-base:bookworm-minbase-py311-git-gxx
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The build's clock (the spec's source_date_epoch, also passed as the build arg BuildKit reads): every step sees it, so
# pip and compileall write hash-checked .pyc files, and the exporter clamps every file time of the layers to it.
ARG SOURCE_DATE_EPOCH=1787049764

ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
# ---- The family's pins: what miles' requirements leave out, and sglang's CPU import set.
RUN --mount=type=bind,from=miles-wheelhouse:miles-cpu-88c8a810858ae322,target=/tmp/wheelhouse \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt \
    torch==2.14.1 \
    torchvision==0.29.1 \
    triton==3.8.0 \
    setuptools==80.9.0 \
    wheel==0.48.0 \
    pytest==9.2.0 \
    openai==2.6.1 \
    blobfile==3.0.0 \
    apache-tvm-ffi==0.1.11 \
    msgspec==0.23.0 \
    pyzmq==27.3.0 \
    ipython==9.18.1 \
    partial-json-parser==0.2.1.1.post7 \
    xgrammar==0.2.1 \
    einops==0.8.2 \
    pybind11==3.1.0 \
    sentencepiece==0.2.3 \
    compressed-tensors==0.20.1 \
    gguf==0.19.0
# ---- sglang's metadata pins its CUDA serving stack (sglang-kernel, flashinfer, cuda-python, torch 2.11.0, ...).
RUN --mount=type=bind,from=miles-wheelhouse:miles-cpu-88c8a810858ae322,target=/tmp/wheelhouse \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt --no-deps sglang==0.5.16
# ---- Megatron-LM as the GPU images install it (an editable checkout at /root/Megatron-LM, helpers_cpp compiled);
# ---- offline, so its build requirements come from the venv instead of an isolated environment.
COPY --from=src-megatron_lm / /root/Megatron-LM
RUN --mount=type=bind,from=miles-wheelhouse:miles-cpu-88c8a810858ae322,target=/tmp/wheelhouse \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt --no-build-isolation -e /root/Megatron-LM
# ---- miles as the GPU images install it, offline from the pin set (setuptools and wheel are in the venv).
RUN --mount=type=bind,from=miles-wheelhouse:miles-cpu-88c8a810858ae322,target=/tmp/wheelhouse \
    --mount=type=bind,from=src-miles,source=requirements.txt,target=/tmp/requirements.in --mount=type=bind,source=tools,target=/tmp/tools \
    /opt/venv/bin/python /tmp/tools/requirements.py /tmp/requirements.in --exclude nvidia-resiliency-ext >/tmp/requirements.txt && \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt --no-build-isolation -r /tmp/requirements.txt && \
    rm /tmp/requirements.txt
COPY --from=src-miles / /root/miles
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    GIT_DIR=/nonexistent git -C /root/miles apply --check -p1 /tmp/patches/miles-attn-bridge.patch && \
    GIT_DIR=/nonexistent git -C /root/miles apply -p1 /tmp/patches/miles-attn-bridge.patch && \
    GIT_DIR=/nonexistent git -C /root/miles apply --reverse --check -p1 /tmp/patches/miles-attn-bridge.patch
RUN --mount=type=bind,from=miles-wheelhouse:miles-cpu-88c8a810858ae322,target=/tmp/wheelhouse \
    pip install --no-cache-dir --no-index --find-links /tmp/wheelhouse --constraint /tmp/wheelhouse/constraints.txt --no-deps --no-build-isolation -e /root/miles
WORKDIR /root/miles

# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it. The host's CA
# ---- bundle is mounted as a secret on every family (offline ones too), so every build proves it never lands in a layer.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca --mount=type=bind,from=miles-wheelhouse:miles-cpu-88c8a810858ae322,target=/tmp/wheelhouse \
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
      org.opencontainers.image.base.name="miles-base:bookworm-minbase-py311-git-gxx" \
      io.miles.variant="miles-cpu" \
      io.miles.spec-digest="63741774e383cf943118e559b470658b8c904ace2c78936e7d9c3499ccb52223"
