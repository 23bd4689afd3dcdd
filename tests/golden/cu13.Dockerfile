# Rendered by build.py from images/cuda.yaml, variant cu13. Do not edit: change the spec or the template.
FROM lmsysorg/sglang:v0.5.16-cu130
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG CUDA_MAJOR="13"
ARG MAX_JOBS="64"
ARG TARGETARCH

WORKDIR /root/
ENV MAX_JOBS=${MAX_JOBS}

# ---- Apt: diagnostics.
RUN apt-get update && \
    apt-get install -y --no-install-recommends dnsutils ethtool rsync tmux && \
    rm -rf /var/lib/apt/lists/*

# ---- NCCL tests (diagnostic binaries), at a pinned commit.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    git init -q /tmp/nccl-tests && \
    git -C /tmp/nccl-tests fetch -q --depth 1 https://github.com/NVIDIA/nccl-tests.git b188a152997740a84b3ce0da864bb4f1423eb35a && \
    git -C /tmp/nccl-tests checkout -q FETCH_HEAD && \
    make -C /tmp/nccl-tests -j"$(nproc)" CUDA_HOME=/usr/local/cuda && \
    cp /tmp/nccl-tests/build/*_perf /usr/local/bin/ && \
    rm -rf /tmp/nccl-tests

# ---- Python dependencies, in upstream's order.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps git+https://github.com/ISEEKYAN/mbridge.git@89eb10887887bc74853f89a4de258c0702932a1c
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir flash-linear-attention==0.4.2
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir tilelang==0.1.8
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps "tile_kernels==1.0.0"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir nvidia-cutlass-dsl==4.6.2 flashinfer-python==0.6.15.post1
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir "transformer-engine[pytorch]==2.17.0" "transformer-engine-cu${CUDA_MAJOR}==2.17.0"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    git init -q /root/Megatron-LM && \
    git -C /root/Megatron-LM fetch -q --depth 1 https://github.com/radixark/Megatron-LM.git e6007f1613a02761e69d4449767f72102da203bf && \
    git -C /root/Megatron-LM checkout -q FETCH_HEAD && \
    git -C /root/Megatron-LM submodule update -q --init --recursive --depth 1 && \
    pip install --no-cache-dir -e /root/Megatron-LM
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    TMS_CUDA_MAJOR="${CUDA_MAJOR}" pip install --no-cache-dir --force-reinstall "git+https://github.com/fzyzcjy/torch_memory_saver.git@f05a8754daf68238d54e4cf31cb3ba866684bbaf"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir nvidia-modelopt==0.40.0
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps --no-build-isolation git+https://github.com/radixark/Megatron-Bridge.git@7f0fb3456f8ffe47599b5fd167b454605d85f932
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir megatron-energon==7.2.2 multi-storage-client==0.51.0
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir typer==0.25.1 click==8.2.1

# ---- miles at a pinned commit, as an editable install of its own source (no overlay, no patch).
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    git init -q /root/miles && \
    git -C /root/miles fetch -q --depth 1 https://github.com/radixark/miles.git bf72ef940a03fb206ac4c09a682f52dd30ebae65 && \
    git -C /root/miles checkout -q FETCH_HEAD && \
    pip install --no-cache-dir -e /root/miles --no-deps

# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    python3 -m pip install --no-cache-dir --no-deps --no-build-isolation /tmp/sglang-attn-bridge

# ---- Gates: verify/ runs with the image's own python against this target's gate list (gates/gates.json).
# ---- Any failing check fails the build, so no tag ever points at an image that does not import. Nothing after
# ---- this step may change how the image behaves (labels only).
RUN --mount=type=bind,source=gates,target=/tmp/gates \
    cd /tmp/gates && python3 -m verify --config gates.json

LABEL org.opencontainers.image.title="miles" \
      org.opencontainers.image.base.name="lmsysorg/sglang:v0.5.16-cu130" \
      io.miles.variant="cu13" \
      io.miles.spec-digest="18fb1f85cdc570f46e976b288b9fda25b86350e749145f988c27ec9da061ae7a"
WORKDIR /root/
