# Rendered by build.py from images/rocm.yaml, variant rocm700-mi35x. Do not edit: change the spec or the template.
FROM rocm/sgl-dev:v0.5.14-rocm700-mi35x-20260627
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG GPU_ARCH="gfx950"
ARG MAX_JOBS="64"

WORKDIR /root/
ENV MAX_JOBS=${MAX_JOBS} \
    GPU_ARCH=${GPU_ARCH} \
    PYTORCH_ROCM_ARCH=${GPU_ARCH} \
    GPU_ARCH_LIST=${GPU_ARCH} \
    AMDGPU_TARGET=${GPU_ARCH} \
    NVTE_FRAMEWORK=pytorch \
    NVTE_ROCM_ARCH=${GPU_ARCH} \
    NVTE_USE_HIPBLASLT=1 \
    NVTE_USE_ROCM=1 \
    CMAKE_PREFIX_PATH=/opt/rocm:/opt/rocm/hip:/usr/local:/usr

# ---- Apt: build tools and diagnostics.
RUN apt-get update && \
    apt-get install -y --no-install-recommends build-essential cmake dnsutils ethtool git rsync && \
    rm -rf /var/lib/apt/lists/*

# ---- RCCL tests (diagnostic binaries), at a pinned commit.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    git init -q /tmp/rccl-tests && \
    git -C /tmp/rccl-tests fetch -q --depth 1 https://github.com/ROCm/rccl-tests.git 4a735add7da2982b5393257d88d133aa5a809ed6 && \
    git -C /tmp/rccl-tests checkout -q FETCH_HEAD && \
    make -C /tmp/rccl-tests -j"$(nproc)" HIP_HOME=/opt/rocm NCCL_HOME=/opt/rocm GPU_TARGETS="${GPU_ARCH}" && \
    cp /tmp/rccl-tests/build/*_perf /usr/local/bin/ && \
    rm -rf /tmp/rccl-tests

# ---- Python dependencies, in upstream's order.
RUN pip uninstall -y transformer-engine transformer_engine transformer_engine_torch
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    git init -q /root/TransformerEngine && \
    git -C /root/TransformerEngine fetch -q --depth 1 https://github.com/ROCm/TransformerEngine.git 0690c5f91e30d85e9a2d12d8241648504ba3f195 && \
    git -C /root/TransformerEngine checkout -q FETCH_HEAD && \
    git -C /root/TransformerEngine submodule update -q --init --recursive --depth 1 && \
    NVTE_FUSED_ATTN=0 pip install --no-cache-dir --no-build-isolation /root/TransformerEngine && \
    rm -rf /root/TransformerEngine
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps git+https://github.com/ISEEKYAN/mbridge.git@89eb10887887bc74853f89a4de258c0702932a1c
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    GPU_ARCHS="${GPU_ARCH}" BUILD_TARGET=rocm pip install --no-cache-dir --no-build-isolation "flash-attn==2.8.3"
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir flash-linear-attention==0.4.2 numba==0.65.1 mooncake-transfer-engine==0.3.12.post1
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    git init -q /root/Megatron-LM && \
    git -C /root/Megatron-LM fetch -q --depth 1 https://github.com/radixark/Megatron-LM.git e6007f1613a02761e69d4449767f72102da203bf && \
    git -C /root/Megatron-LM checkout -q FETCH_HEAD && \
    git -C /root/Megatron-LM submodule update -q --init --recursive --depth 1 && \
    pip install --no-cache-dir -e /root/Megatron-LM
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --force-reinstall git+https://github.com/fzyzcjy/torch_memory_saver.git@f05a8754daf68238d54e4cf31cb3ba866684bbaf
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps --no-build-isolation git+https://github.com/radixark/Megatron-Bridge.git@7f0fb3456f8ffe47599b5fd167b454605d85f932
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir megatron-energon==7.2.2 multi-storage-client==0.51.0
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir nvidia-modelopt==0.40.0
# modelopt lifts setuptools past the version that still ships pkg_resources; pin it back, and the CLI stack.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir setuptools==79.0.1 typer==0.25.1 click==8.2.1

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

# ---- The runtime environment, before the gates: the gates judge the image exactly as it will run.
ENV HIP_FORCE_DEV_KERNARG="1" \
    HSA_NO_SCRATCH_RECLAIM="1" \
    NCCL_MIN_NCHANNELS="112" \
    RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO="0" \
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1" \
    SGLANG_MOE_PADDING="1" \
    SGLANG_ROCM_FUSED_DECODE_MLA="1" \
    SGLANG_SET_CPU_AFFINITY="1" \
    SGLANG_USE_AITER="1"
# ---- Gates: verify/ runs with the image's own python against this target's gate list (gates/gates.json).
# ---- Any failing check fails the build, so no tag ever points at an image that does not import. Nothing after
# ---- this step may change how the image behaves (labels only).
RUN --mount=type=bind,source=gates,target=/tmp/gates \
    cd /tmp/gates && python3 -m verify --config gates.json

LABEL org.opencontainers.image.title="miles" \
      org.opencontainers.image.base.name="rocm/sgl-dev:v0.5.14-rocm700-mi35x-20260627" \
      io.miles.variant="rocm700-mi35x" \
      io.miles.spec-digest="51784e13f6579d81728f37a391ad610194275a71eb2bab366d678129b39fea51"
WORKDIR /root/
CMD ["/bin/bash"]
