# Rendered by build.py from images/cuda.yaml, variant cu13-x86. Do not edit: change the spec or the template.
FROM lmsysorg/sglang:v0.5.16
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG CUDA_MAJOR="13"
ARG MAX_JOBS="64"

WORKDIR /root/
ENV MAX_JOBS=${MAX_JOBS}

# ---- Apt: diagnostics.
RUN apt-get update && \
    apt-get install -y --no-install-recommends dnsutils ethtool nvtop rsync tmux && \
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
    pip install --no-cache-dir flash-linear-attention==0.4.2
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir tilelang==0.1.8
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps tile_kernels==1.0.0
# Hadamard transform, and the Mamba kernels of nemotron_h hybrid models: source builds against the base's torch.
RUN --mount=type=bind,from=src-fast_hadamard_transform,target=/tmp/src/fast_hadamard_transform,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-build-isolation /tmp/src/fast_hadamard_transform
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-build-isolation causal-conv1d==1.6.1 mamba-ssm==2.3.1
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir 'transformer-engine[pytorch]==2.17.0' "transformer-engine-cu${CUDA_MAJOR}"==2.17.0
COPY --from=src-megatron_lm / /root/Megatron-LM
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir -e /root/Megatron-LM
# ---- The spec's patches (TransformerEngine fixes on CUDA 13), each checked before and after.
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    git -C /usr/local/lib/python3.12/dist-packages/transformer_engine apply --check -p1 /tmp/patches/cu13-te_dequantized_backward_override.patch && \
    git -C /usr/local/lib/python3.12/dist-packages/transformer_engine apply -p1 /tmp/patches/cu13-te_dequantized_backward_override.patch && \
    git -C /usr/local/lib/python3.12/dist-packages/transformer_engine apply --reverse --check -p1 /tmp/patches/cu13-te_dequantized_backward_override.patch
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    git -C /usr/local/lib/python3.12/dist-packages/transformer_engine apply --check -p1 /tmp/patches/cu13-te_fa2_sm103_whitelist.patch && \
    git -C /usr/local/lib/python3.12/dist-packages/transformer_engine apply -p1 /tmp/patches/cu13-te_fa2_sm103_whitelist.patch && \
    git -C /usr/local/lib/python3.12/dist-packages/transformer_engine apply --reverse --check -p1 /tmp/patches/cu13-te_fa2_sm103_whitelist.patch
RUN --mount=type=bind,from=src-torch_memory_saver,target=/tmp/src/torch_memory_saver,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    TMS_CUDA_MAJOR="${CUDA_MAJOR}" pip install --no-cache-dir --force-reinstall /tmp/src/torch_memory_saver
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir nvidia-modelopt==0.40.0
RUN --mount=type=bind,from=src-megatron_bridge,target=/tmp/src/megatron_bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps --no-build-isolation /tmp/src/megatron_bridge
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps megatron-energon==7.2.2 multi-storage-client==0.51.0

# ---- miles' requirements.txt, read from its source (the pinned commit, or a local `--source`; only that file, so a
# ---- change elsewhere in miles keeps this layer), less the spec's `exclude` names (image_tools/requirements.py).
# ---- The apt copy of PyJWT has no pip record, so pip could not replace it: it goes first, as upstream does.
RUN --mount=type=bind,from=src-miles,source=requirements.txt,target=/tmp/miles-requirements.txt \
    --mount=type=bind,source=tools,target=/tmp/tools --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    rm -rf /usr/lib/python3/dist-packages/jwt /usr/lib/python3/dist-packages/PyJWT* && \
    python3 /tmp/tools/requirements.py /tmp/miles-requirements.txt >/tmp/requirements.txt && \
    pip install --no-cache-dir -r /tmp/requirements.txt && \
    rm /tmp/requirements.txt
# ---- miles itself, as an editable install of its own source tree, wired to the bridge by the spec's
# ---- full-context patches for the miles component.
COPY --from=src-miles / /root/miles
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    git -C /root/miles apply --check -p1 /tmp/patches/miles-attn-bridge.patch && \
    git -C /root/miles apply -p1 /tmp/patches/miles-attn-bridge.patch && \
    git -C /root/miles apply --reverse --check -p1 /tmp/patches/miles-attn-bridge.patch
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir -e /root/miles --no-deps

# ---- cuDNN from pip only: the base's apt copy shadows it in ldconfig and the loader would mix the two.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    apt-get remove -y --purge --allow-change-held-packages "libcudnn9-cuda-${CUDA_MAJOR}" "libcudnn9-dev-cuda-${CUDA_MAJOR}" "libcudnn9-headers-cuda-${CUDA_MAJOR}" && \
    rm -rf /var/lib/apt/lists/* && \
    pip install --no-cache-dir "nvidia-cudnn-cu${CUDA_MAJOR}"==9.22.0.52
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir typer==0.25.1 click==8.2.1

# ---- Last, over everything else and without deps, so no earlier resolve can move them:
# ---- apache-tvm-ffi at sglang's own pin (cutlass-dsl 4.6 calls make_kwargs_wrapper(map_dataclass_to_tuple=...));
# ---- every nvidia-cutlass-dsl component at 4.6.2 (4.6.0/4.6.1 hang FA4's CuTe backward on sm_103; the meta-package
# ---- alone does not move the runtime libs); flashinfer python + cubin at 0.6.15.post1 (Blackwell MoE cubin fixes).
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --force-reinstall --no-deps apache-tvm-ffi==0.1.11 nvidia-cutlass-dsl==4.6.2 nvidia-cutlass-dsl-libs-base==4.6.2 nvidia-cutlass-dsl-libs-core==4.6.2 nvidia-cutlass-dsl-libs-cu12==4.6.2 nvidia-cutlass-dsl-libs-cu13==4.6.2 flashinfer-python==0.6.15.post1 flashinfer-cubin==0.6.15.post1

# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    python3 -m pip install --no-cache-dir --no-deps --no-build-isolation /tmp/sglang-attn-bridge

# ---- The runtime environment, before the gates: the gates judge the image exactly as it will run.
ENV FLASHINFER_VERSION="0.6.15.post1"
# ---- Gates: verify/ runs with the image's own python against this target's gate list (gates/gates.json).
# ---- Any failing check fails the build, so no tag ever points at an image that does not import. Nothing after
# ---- this step may change how the image behaves (labels only).
RUN --mount=type=bind,source=gates,target=/tmp/gates \
    cd /tmp/gates && python3 -m verify --config gates.json

LABEL org.opencontainers.image.title="miles" \
      org.opencontainers.image.base.name="lmsysorg/sglang:v0.5.16" \
      io.miles.variant="cu13-x86" \
      io.miles.spec-digest="de7bba14b57dbc42c187c9916e8663316b08bdbdadabf506c3890c9f65ba1669"
WORKDIR /root/
