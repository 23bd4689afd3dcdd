# Rendered by build.py from images/cuda.yaml, variant cu13-aarch64. Do not edit: change the spec or the template.
FROM lmsysorg/sglang:v0.5.16-cu130
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG CUDA_MAJOR=13
ARG MAX_JOBS=64
ARG TARGETARCH

WORKDIR /root/
ENV MAX_JOBS=${MAX_JOBS}

# ---- Apt: diagnostics.
RUN apt-get update && \
    apt-get install -y --no-install-recommends dnsutils ethtool rsync tmux && \
    rm -rf /var/lib/apt/lists/*

# ---- NCCL tests (diagnostic binaries), at a pinned commit.
RUN --mount=type=bind,from=src-nccl_tests,target=/tmp/nccl-tests,rw \
    make -C /tmp/nccl-tests -j"$(nproc)" CUDA_HOME=/usr/local/cuda && \
    cp /tmp/nccl-tests/build/*_perf /usr/local/bin/

# ---- Python dependencies, in upstream's order.
RUN --mount=type=bind,from=src-mbridge,target=/tmp/src/mbridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps /tmp/src/mbridge
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir "flash-linear-attention==0.4.2"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir "tilelang==0.1.8"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps "tile_kernels==1.0.0"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir "nvidia-cutlass-dsl==4.6.2" "flashinfer-python==0.6.15.post1"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir "transformer-engine[pytorch]==2.17.0" "transformer-engine-cu${CUDA_MAJOR}==2.17.0"
COPY --from=src-megatron_lm / /root/Megatron-LM
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir -e /root/Megatron-LM
RUN --mount=type=bind,from=src-torch_memory_saver,target=/tmp/src/torch_memory_saver,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    TMS_CUDA_MAJOR="${CUDA_MAJOR}" pip install --no-cache-dir --force-reinstall /tmp/src/torch_memory_saver
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir "nvidia-modelopt==0.40.0"
RUN --mount=type=bind,from=src-megatron_bridge,target=/tmp/src/megatron_bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps --no-build-isolation /tmp/src/megatron_bridge
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir "megatron-energon==7.2.2" "multi-storage-client==0.51.0"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir "typer==0.25.1" "click==8.2.1"

# ---- miles (its pinned commit, or a local `--source`), as an editable install of its own source tree.
COPY --from=src-miles / /root/miles
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir -e /root/miles --no-deps

# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    python3 -m pip install --no-cache-dir --no-deps --no-build-isolation /tmp/sglang-attn-bridge

# ---- Gates: verify/ runs with the image's own python against this target's gate list (gates/gates.json).
# ---- Any failing check fails the build, so no tag ever points at an image that does not import.
RUN --mount=type=bind,source=gates,target=/tmp/gates \
    cd /tmp/gates && python3 -m verify --config gates.json

LABEL org.opencontainers.image.title="miles" \
      org.opencontainers.image.base.name="lmsysorg/sglang:v0.5.16-cu130" \
      io.miles.variant="cu13-aarch64" \
      io.miles.spec-digest="9c8f0dfa8947bc0930d6c346ef62dc43cd6b41de039e486b2b34615498983da5"
WORKDIR /root/
