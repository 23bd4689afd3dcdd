# Rendered by build.py from images/rocm.yaml, variant rocm700-mi30x. Do not edit: change the spec or the template.
# Checksum-pinned files (the lock's sha256): BuildKit fetches each in a stage of its own and refuses another digest.
FROM scratch AS art-rust-x86-64
ADD --checksum=sha256:3bb1925a0a5ad2c17be731ee6e977e4a68490ab2182086db897bd28be21e965f ["https://static.rust-lang.org/dist/rust-1.94.0-x86_64-unknown-linux-gnu.tar.gz", "/rust-1.94.0-x86_64-unknown-linux-gnu.tar.gz"]
FROM lmsysorg/sglang:v0.5.10-rocm700-mi30x
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The build's clock (the spec's source_date_epoch, also passed as the build arg BuildKit reads): every step sees it, so
# pip and compileall write hash-checked .pyc files, and the exporter clamps every file time of the layers to it.
ARG SOURCE_DATE_EPOCH=1787049764
ARG APPLY_ROCR_VMMFIX="0"
ARG GPU_ARCH="gfx942"
ARG MAX_JOBS=""

WORKDIR /root/
ENV AMDGPU_TARGET="${GPU_ARCH}" \
    CMAKE_PREFIX_PATH="/opt/rocm:/opt/rocm/hip:/usr/local:/usr" \
    GPU_ARCH="${GPU_ARCH}" \
    GPU_ARCH_LIST="${GPU_ARCH}" \
    NVTE_FRAMEWORK="pytorch" \
    NVTE_ROCM_ARCH="${GPU_ARCH}" \
    NVTE_USE_HIPBLASLT="1" \
    NVTE_USE_ROCM="1" \
    PYTORCH_ROCM_ARCH="${GPU_ARCH}"
# ---- Apt: build tools and diagnostics, and protoc, which the router's build.rs runs to compile its gRPC protocol.
RUN apt-get update && \
    apt-get install -y --no-install-recommends build-essential cmake dnsutils ethtool git nvtop protobuf-compiler rsync && \
    rm -rf /var/lib/apt/lists/*
# ---- The whole Python environment the lock resolved for this variant (`build.py lock`), every file by its sha256,
# ---- before any step builds: later steps install their own pins and trees with --no-deps, so none resolves
# ---- anything. The base's own ROCm builds (torch, triton, sgl-kernel, tilelang, mooncake, TransformerEngine) and
# ---- its sglang tree are left out of the resolve and kept as the base has them. The apt copy of PyJWT has no pip
# ---- record, so it goes first.
RUN --mount=type=secret,id=pip-ca --mount=type=bind,source=closure.txt,target=/tmp/closure.txt \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    rm -rf /usr/lib/python3/dist-packages/jwt /usr/lib/python3/dist-packages/PyJWT* && \
    pip install --no-cache-dir --require-hashes --no-deps --only-binary :all: -r /tmp/closure.txt
# ---- RCCL tests (diagnostic binaries), from the rocm-systems tree at a pinned commit.
RUN --mount=type=bind,from=src-rccl_tests,target=/tmp/src/rccl_tests,rw \
    make -C /tmp/src/rccl_tests/projects/rccl-tests -j"$(nproc)" GPU_TARGETS="${GPU_ARCH}" HIP_HOME=/opt/rocm NCCL_HOME=/opt/rocm && \
    cp /tmp/src/rccl_tests/projects/rccl-tests/build/*_perf /usr/local/bin/
# ---- Python dependencies, in upstream's order. The base's TransformerEngine goes first, then the ROCm build.
RUN pip uninstall -y transformer-engine transformer_engine transformer_engine_torch
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=bind,from=src-transformer_engine,target=/tmp/src/transformer_engine,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    NVTE_FUSED_ATTN=0 python3 /tmp/tools/jobs.py --gib-per-job 8 --cpus-per-job 1 -- pip install --no-cache-dir --no-build-isolation --no-deps /tmp/src/transformer_engine
RUN --mount=type=bind,from=src-mbridge,target=/tmp/src/mbridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps /tmp/src/mbridge
# ---- flash-attn 2 compiled from its sdist for the variant's GPU_ARCH (FORCE_BUILD: without it its setup.py first
# ---- downloads a prebuilt wheel from GitHub, unpinned, and installs that instead of compiling).
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'flash-attn==2.8.3 --hash=sha256:1e71dd64a9e0280e0447b8a0c2541bad4bf6ac65bdeaa2f90e51a9e57de0370d' >/tmp/pip-locked.txt && \
    BUILD_TARGET=rocm FLASH_ATTENTION_FORCE_BUILD=TRUE GPU_ARCHS="${GPU_ARCH}" python3 /tmp/tools/jobs.py --gib-per-job 9 --cpus-per-job 2 -- pip install --no-cache-dir --no-build-isolation --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- mooncake: the base image's ROCm build lacks the pure-Python files; take only those from the non-CUDA wheel.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'mooncake-transfer-engine-non-cuda==0.3.12.post1 --hash=sha256:b2d960b1028714567afab3fc32340d2a2af33c2f49fa865613a0d729bda6a6ff' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes --target=/tmp/py-files -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt && \
    cp -n /tmp/py-files/mooncake/*.py "$(python3 -c 'import mooncake, os; print(os.path.dirname(mooncake.__file__))')" && \
    rm -rf /tmp/py-files
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'flash-linear-attention==0.4.2 --hash=sha256:c08be006ce4dbe1be81f54938ee8e6fc7968cfba397c8d06c7669e97b8c44c0d' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'tile_kernels==1.0.0 --hash=sha256:9f1e09c1bccde32f3189d1ff32ba9725f86fc04ac1d0ac93284e16fcab1a5666' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- Megatron-LM over whatever the base has at /root/Megatron-LM (upstream removes that tree before its clone).
RUN rm -rf /root/Megatron-LM
COPY --from=src-megatron_lm / /root/Megatron-LM
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps -e /root/Megatron-LM
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    GIT_DIR=/nonexistent git -C /opt/venv/lib/python3.10/site-packages apply --check -p1 /tmp/patches/rocm-tile_kernels.patch && \
    GIT_DIR=/nonexistent git -C /opt/venv/lib/python3.10/site-packages apply -p1 /tmp/patches/rocm-tile_kernels.patch && \
    GIT_DIR=/nonexistent git -C /opt/venv/lib/python3.10/site-packages apply --reverse --check -p1 /tmp/patches/rocm-tile_kernels.patch
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    GIT_DIR=/nonexistent git -C /opt/tilelang/src/tl_templates/hip apply --check -p1 /tmp/patches/rocm-tilelang_hip_fp8.patch && \
    GIT_DIR=/nonexistent git -C /opt/tilelang/src/tl_templates/hip apply -p1 /tmp/patches/rocm-tilelang_hip_fp8.patch && \
    GIT_DIR=/nonexistent git -C /opt/tilelang/src/tl_templates/hip apply --reverse --check -p1 /tmp/patches/rocm-tilelang_hip_fp8.patch
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    GIT_DIR=/nonexistent git -C /root/Megatron-LM apply --check -p1 /tmp/patches/rocm-megatron.patch && \
    GIT_DIR=/nonexistent git -C /root/Megatron-LM apply -p1 /tmp/patches/rocm-megatron.patch && \
    GIT_DIR=/nonexistent git -C /root/Megatron-LM apply --reverse --check -p1 /tmp/patches/rocm-megatron.patch
# ---- sglang from the sglang-miles commit of miles' release lock, over the base image's checkout (a git checkout, as
# ---- upstream's CI moves it to other refs), editable and without deps as upstream installs it, from the tree's non-
# ---- CUDA manifest (pyproject_other.toml, as sglang's ROCm images install it; the default one is CUDA 13's); built
# ---- as 0.5.16, the release this commit pairs with in miles v0.1.0 (the tree carries no tags), on every variant
# ---- alike.
RUN rm -rf /sgl-workspace/sglang
COPY --from=src-sglang_miles / /sgl-workspace/sglang
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    python3 /tmp/tools/pyproject.py /sgl-workspace/sglang/python --use pyproject_other.toml && \
    SETUPTOOLS_SCM_PRETEND_VERSION=0.5.16 pip install --no-cache-dir --no-deps -e '/sgl-workspace/sglang/python[all_hip]'
# ---- sglang's Inkling multimodal processor imports numba, which the base's no-deps sglang install does not bring.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'numba==0.65.1 --hash=sha256:5f098109f361681e57295f7e84d8ab2426902539a141811de0703ace52826981' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
RUN --mount=type=bind,from=src-torch_memory_saver,target=/tmp/src/torch_memory_saver,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --force-reinstall --no-deps /tmp/src/torch_memory_saver
RUN --mount=type=bind,from=src-megatron_bridge,target=/tmp/src/megatron_bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps --no-build-isolation /tmp/src/megatron_bridge
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'megatron-energon==7.2.2 --hash=sha256:a26805605ade83f2472338a8be888ca5d50cdeae7594679602a61b93c2ed441e' 'multi-storage-client==0.25.0 --hash=sha256:234f4f14033a87af6b29d57a41b193ba371f3dd759730b5b54c37752b30ee094' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'nvidia-modelopt==0.40.0 --hash=sha256:0315f53aef014b902866e427038db5803e3c6787a8e1f09c3650031550885051' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- modelopt lifts setuptools past the version that still ships pkg_resources; pin it back.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'setuptools==79.0.1 --hash=sha256:e147c0549f27767ba362f9da434eab9c5dc0045d5304feb602a0af001089fc51' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- miles' requirements.txt, less `exclude`, which the closure holds (this step checks it, offline).
RUN --mount=type=secret,id=pip-ca \
    --mount=type=bind,from=src-miles,source=requirements.txt,target=/tmp/requirements.in --mount=type=bind,source=tools,target=/tmp/tools \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    python3 /tmp/tools/requirements.py /tmp/requirements.in --exclude nvidia-resiliency-ext >/tmp/requirements.txt && \
    pip install --no-cache-dir --no-index --no-deps --dry-run -r /tmp/requirements.txt && \
    rm /tmp/requirements.txt
# ---- miles itself, editable from its own tree, wired to the bridge by its patch right after the copy.
COPY --from=src-miles / /root/miles
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    GIT_DIR=/nonexistent git -C /root/miles apply --check -p1 /tmp/patches/miles-attn-bridge.patch && \
    GIT_DIR=/nonexistent git -C /root/miles apply -p1 /tmp/patches/miles-attn-bridge.patch && \
    GIT_DIR=/nonexistent git -C /root/miles apply --reverse --check -p1 /tmp/patches/miles-attn-bridge.patch
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps -e /root/miles
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'maturin==1.16.0 --hash=sha256:837db2f4d93d4899c3ac393fb3cc9eebf35b6002336e5d574f4a4fb6c49fe283' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- miles' router fork: the sgl-model-gateway binary and the sglang_router package over PyPI's, from a pinned
# ---- commit with a checksum-pinned Rust release (the fork has no Cargo.lock: crates resolve at build time).
RUN --mount=type=bind,from=src-sgl_router,target=/tmp/src/sgl_router,rw --mount=type=bind,from=art-rust-x86-64,target=/tmp/artifacts/rust_x86_64 --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    case "$(uname -m)" in \
      x86_64) toolchain=/tmp/artifacts/rust_x86_64/rust-1.94.0-x86_64-unknown-linux-gnu.tar.gz ;; \
      *) echo "no Rust toolchain artifact for $(uname -m)" >&2; exit 1 ;; \
    esac && \
    mkdir /tmp/rust-dist && tar -xzf "$toolchain" -C /tmp/rust-dist --strip-components=1 && \
    /tmp/rust-dist/install.sh --prefix=/tmp/rust --disable-ldconfig >/dev/null && \
    export PATH="/tmp/rust/bin:$PATH" CARGO_HOME=/tmp/cargo-home CARGO_TARGET_DIR=/tmp/cargo-target && \
    if [ -n "${PIP_CERT:-}" ]; then export CARGO_HTTP_CAINFO="$PIP_CERT"; fi && \
    cargo build --release --manifest-path /tmp/src/sgl_router/Cargo.toml --bin sgl-model-gateway --features vendored-openssl && \
    install -m 0755 /tmp/cargo-target/release/sgl-model-gateway /usr/local/bin/sgl-model-gateway && \
    MATURIN_PEP517_ARGS='--features vendored-openssl' pip install --no-cache-dir --force-reinstall --no-deps --no-build-isolation /tmp/src/sgl_router/bindings/python && \
    rm -rf /tmp/rust-dist /tmp/rust /tmp/cargo-home /tmp/cargo-target
# ---- After miles' requirements: the CLI stack for huggingface_hub/Ray, and numpy 1.x for Megatron.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'typer==0.25.1 --hash=sha256:75caa44ed46a03fb2dab8808753ffacdbfea88495e74c85a28c5eefcf5f39c89' 'click==8.2.1 --hash=sha256:61a3265b914e850b85317d0b3109c7f8cd35a670f963866005d6ef1d5175a12b' 'numpy==1.26.4 --hash=sha256:ffa75af20b44f8dba823498024771d5ac50620e6915abac414251bd971b4529f' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt

# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it. The host's CA
# ---- bundle is mounted as a secret on every family (offline ones too), so every build proves it never lands in a layer.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    python3 -m pip install --no-cache-dir --no-deps --no-build-isolation /tmp/sglang-attn-bridge \
    && test "$(python3 -c 'import importlib.metadata as m, sys; print(sys.implementation.name, m.version("sglang-attn-bridge"))')" = 'cpython 0.2.0'

# ---- The runtime environment, before the gates: the gates judge the image exactly as it will run.
ENV HIP_FORCE_DEV_KERNARG="1" \
    HSA_ENABLE_IPC_MODE_LEGACY="1" \
    HSA_NO_SCRATCH_RECLAIM="1" \
    MILES_HARDWARE_PLATFORM="rocm" \
    NCCL_MIN_NCHANNELS="112" \
    RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO="0" \
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1" \
    SGLANG_MOE_PADDING="1" \
    SGLANG_ROCM_FUSED_DECODE_MLA="1" \
    SGLANG_SET_CPU_AFFINITY="1" \
    SGLANG_USE_AITER="1" \
    SGLANG_USE_ROCM700A="1" \
    TORCHINDUCTOR_MAX_AUTOTUNE="1" \
    TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE="1"
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
    && PYTHONDONTWRITEBYTECODE=1 python3 -m verify --config gates.json --nonce "${MILES_GATE_NONCE}" --json - --json-line /usr/share/miles-gates/report.json \
    && grep -q "\"nonce\":\"${MILES_GATE_NONCE}\"" /usr/share/miles-gates/report.json

LABEL org.opencontainers.image.title="miles" \
      org.opencontainers.image.base.name="lmsysorg/sglang:v0.5.10-rocm700-mi30x" \
      io.miles.variant="rocm700-mi30x" \
      io.miles.spec-digest="ce140cbeb77a413380de3bcfe1be193ebb2b3427374f70179bff1c27ac7c120d"
WORKDIR /root/
CMD ["/bin/bash"]
