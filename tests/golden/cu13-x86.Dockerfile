# Rendered by build.py from images/cuda.yaml, variant cu13-x86. Do not edit: change the spec or the template.
# Checksum-pinned files (the lock's sha256): BuildKit fetches each in a stage of its own and refuses another digest.
FROM scratch AS art-rust-x86-64
ADD --checksum=sha256:3bb1925a0a5ad2c17be731ee6e977e4a68490ab2182086db897bd28be21e965f ["https://static.rust-lang.org/dist/rust-1.94.0-x86_64-unknown-linux-gnu.tar.gz", "/rust-1.94.0-x86_64-unknown-linux-gnu.tar.gz"]
FROM lmsysorg/sglang:v0.5.16
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The build's clock (the spec's source_date_epoch, also passed as the build arg BuildKit reads): every step sees it, so
# pip and compileall write hash-checked .pyc files, and the exporter clamps every file time of the layers to it.
ARG SOURCE_DATE_EPOCH=1787049764
ARG CUDA_ARCHS="8.0;9.0;10.0;10.3;12.0"
ARG CUDA_MAJOR="13"
ARG FLASHINFER_CUDA="cu130"
ARG MAX_JOBS=""

WORKDIR /root/
# ---- Apt: diagnostics, and protoc, which the router's build.rs runs to compile its gRPC protocol.
RUN apt-get update && \
    apt-get install -y --no-install-recommends dnsutils ethtool nvtop protobuf-compiler rsync tmux && \
    rm -rf /var/lib/apt/lists/*
# ---- The base's TransformerEngine goes first, as upstream's does: pip would otherwise leave the base's core
# ---- distribution of the other CUDA major (or a torch extension of another version) beside the one the closure and
# ---- the TransformerEngine step install.
RUN pip uninstall -y transformer-engine transformer-engine-cu12 transformer-engine-cu13 transformer-engine-torch
# ---- The whole Python environment the lock resolved for this variant (`build.py lock`), every file by its sha256,
# ---- before any step builds: later steps install their own pins with --no-deps, so none resolves anything. The apt
# ---- copy of PyJWT has no pip record, so it goes first.
RUN --mount=type=secret,id=pip-ca --mount=type=bind,source=closure.txt,target=/tmp/closure.txt \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    rm -rf /usr/lib/python3/dist-packages/jwt /usr/lib/python3/dist-packages/PyJWT* && \
    pip install --no-cache-dir --require-hashes --no-deps --only-binary :all: -r /tmp/closure.txt
# ---- NCCL tests (diagnostic binaries), at a pinned commit.
RUN --mount=type=bind,from=src-nccl_tests,target=/tmp/src/nccl_tests,rw \
    make -C /tmp/src/nccl_tests -j"$(nproc)" CUDA_HOME=/usr/local/cuda && \
    cp /tmp/src/nccl_tests/build/*_perf /usr/local/bin/
# ---- Python dependencies, in upstream's order. flash-attn 2 (FSDP's default attn_implementation), compiled from its
# ---- sdist (FORCE_BUILD: never a wheel downloaded by its setup.py).
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'flash-attn==2.8.3 --hash=sha256:1e71dd64a9e0280e0447b8a0c2541bad4bf6ac65bdeaa2f90e51a9e57de0370d' >/tmp/pip-locked.txt && \
    FLASH_ATTENTION_FORCE_BUILD=TRUE python3 /tmp/tools/jobs.py --gib-per-job 9 --cpus-per-job 2 -- pip install --no-cache-dir --no-build-isolation --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- FlashAttention 3 (Hopper, sm_90a; what miles' CUDA true-on-policy path and TransformerEngine import as
# ---- flash_attn_interface), beside FA2. On CUDA 13 hopper/setup.py compiles with the image's nvcc, and
# ---- OFFLINE_BUILD keeps it from downloading anything.
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=bind,from=src-flash_attention,target=/tmp/src/flash_attention,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    FLASH_ATTENTION_DISABLE_SM80=TRUE FLASH_ATTENTION_FORCE_BUILD=TRUE FLASH_ATTENTION_OFFLINE_BUILD=1 python3 /tmp/tools/jobs.py --gib-per-job 9 --cpus-per-job 2 -- pip install --no-cache-dir --no-build-isolation --no-deps /tmp/src/flash_attention/hopper
RUN --mount=type=bind,from=src-mbridge,target=/tmp/src/mbridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps /tmp/src/mbridge
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
# ---- Hadamard transform, and the Mamba kernels of nemotron_h hybrid models: source builds against the base's torch.
# ---- FORCE_BUILD on each: without it their setup.py first downloads a prebuilt wheel from GitHub (unpinned) and,
# ---- where GitHub cannot be reached, fails (it catches only an HTTP error) instead of compiling.
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=bind,from=src-fast_hadamard_transform,target=/tmp/src/fast_hadamard_transform,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    FAST_HADAMARD_TRANSFORM_FORCE_BUILD=TRUE python3 /tmp/tools/jobs.py --gib-per-job 4 --cpus-per-job 4 -- pip install --no-cache-dir --no-build-isolation --no-deps /tmp/src/fast_hadamard_transform
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'causal-conv1d==1.6.1 --hash=sha256:e4a697ec2db3906f012e675125569f8b510b4559bc53e3095143d91369e1221b' 'mamba-ssm==2.3.1 --hash=sha256:4d529477ad94753962216d583fc8f1c127c717b7d7c875d6bbb9376366d0d761' >/tmp/pip-locked.txt && \
    CAUSAL_CONV1D_FORCE_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE python3 /tmp/tools/jobs.py --gib-per-job 8 --cpus-per-job 4 -- pip install --no-cache-dir --no-build-isolation --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- TransformerEngine: the core wheel of the base's CUDA major, and its torch extension (transformer_engine_torch,
# ---- an sdist only) compiled against the base's torch without build isolation (isolated, pip would build it against
# ---- the index's newest torch); FORCE_BUILD: never a wheel its setup.py downloads.
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'transformer-engine[pytorch]==2.17.1 --hash=sha256:8a4543c0b0ffe4c6117bfbe7a0b6bb9acba0d159782fa4922aaee202ba2cfdc9' 'transformer-engine-cu13==2.17.1 --hash=sha256:f24a3d84938da755127378e580c56d8918316e84d4ba65a74f50723a688fc29a' 'transformer-engine-torch==2.17.1 --hash=sha256:5891479407be643c2c6df3b68b25a6b9497a996efe577eb88899c27c04dad9e2' >/tmp/pip-locked.txt && \
    NVTE_PYTORCH_FORCE_BUILD=TRUE python3 /tmp/tools/jobs.py --gib-per-job 4 --cpus-per-job 1 -- pip install --no-cache-dir --no-build-isolation --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- apex with its C++ and CUDA extensions: Megatron's ColumnParallelLinear needs fused_weight_gradient_mlp_cuda
# ---- when gradient-accumulation fusion is on (its default).
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=bind,from=src-apex,target=/tmp/src/apex,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    APEX_CPP_EXT=1 APEX_CUDA_EXT=1 NVCC_APPEND_FLAGS='--threads 4' python3 /tmp/tools/jobs.py --gib-per-job 4 --cpus-per-job 4 --parallel-env APEX_PARALLEL_BUILD --parallel-max 8 -- pip install --no-cache-dir --no-build-isolation --no-deps /tmp/src/apex
COPY --from=src-megatron_lm / /root/Megatron-LM
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps -e /root/Megatron-LM
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    tree="$(python3 -c 'import importlib.util, sys; print(importlib.util.find_spec(sys.argv[1]).submodule_search_locations[0])' transformer_engine)" && \
    GIT_DIR=/nonexistent git -C "$tree" apply --check -p1 /tmp/patches/cu13-te_dequantized_backward_override.patch && \
    GIT_DIR=/nonexistent git -C "$tree" apply -p1 /tmp/patches/cu13-te_dequantized_backward_override.patch && \
    GIT_DIR=/nonexistent git -C "$tree" apply --reverse --check -p1 /tmp/patches/cu13-te_dequantized_backward_override.patch
RUN --mount=type=bind,source=patches,target=/tmp/patches \
    tree="$(python3 -c 'import importlib.util, sys; print(importlib.util.find_spec(sys.argv[1]).submodule_search_locations[0])' transformer_engine)" && \
    GIT_DIR=/nonexistent git -C "$tree" apply --check -p1 /tmp/patches/cu13-te_fa2_sm103_whitelist.patch && \
    GIT_DIR=/nonexistent git -C "$tree" apply -p1 /tmp/patches/cu13-te_fa2_sm103_whitelist.patch && \
    GIT_DIR=/nonexistent git -C "$tree" apply --reverse --check -p1 /tmp/patches/cu13-te_fa2_sm103_whitelist.patch
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'absl-py==2.3.1 --hash=sha256:eeecf07f0c2a93ace0772c92e596ace6d3d3996c042b2128459aaae2a76de11d' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- Emerging-Optimizers (Megatron's --optimizer muon): from git, as its PyPI name is not the project.
RUN --mount=type=bind,from=src-emerging_optimizers,target=/tmp/src/emerging_optimizers,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps /tmp/src/emerging_optimizers
RUN --mount=type=bind,from=src-torch_memory_saver,target=/tmp/src/torch_memory_saver,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    TMS_CUDA_MAJOR="${CUDA_MAJOR}" pip install --no-cache-dir --force-reinstall --no-deps /tmp/src/torch_memory_saver
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'nvidia-modelopt==0.40.0 --hash=sha256:0315f53aef014b902866e427038db5803e3c6787a8e1f09c3650031550885051' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
RUN --mount=type=bind,from=src-megatron_bridge,target=/tmp/src/megatron_bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --no-deps --no-build-isolation /tmp/src/megatron_bridge
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'megatron-energon==7.2.2 --hash=sha256:a26805605ade83f2472338a8be888ca5d50cdeae7594679602a61b93c2ed441e' 'multi-storage-client==0.25.0 --hash=sha256:234f4f14033a87af6b29d57a41b193ba371f3dd759730b5b54c37752b30ee094' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- miles' requirements.txt, which the closure holds (this step checks it, offline).
RUN --mount=type=secret,id=pip-ca \
    --mount=type=bind,from=src-miles,source=requirements.txt,target=/tmp/requirements.in --mount=type=bind,source=tools,target=/tmp/tools \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    python3 /tmp/tools/requirements.py /tmp/requirements.in >/tmp/requirements.txt && \
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
# ---- cuDNN from pip only: the base's apt copy shadows it in ldconfig and the loader would mix the two.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    apt-get remove -y --purge --allow-change-held-packages libcudnn9-cuda-"${CUDA_MAJOR}" libcudnn9-dev-cuda-"${CUDA_MAJOR}" libcudnn9-headers-cuda-"${CUDA_MAJOR}" && \
    rm -rf /var/lib/apt/lists/* && \
    printf '%s\n' 'nvidia-cudnn-cu13==9.22.0.52 --hash=sha256:7b24277af8cd2e4e5be731f5cf910255105d4b92481999771b99dbffee75d03e' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- sglang from the sglang-miles commit of miles' release lock, over the base image's checkout (a git checkout, as
# ---- upstream's CI moves it to other refs), editable and without deps as upstream installs it; built as 0.5.16, the
# ---- release this commit pairs with in miles v0.1.0 (the tree carries no tags), on every variant alike.
RUN rm -rf /sgl-workspace/sglang
COPY --from=src-sglang_miles / /sgl-workspace/sglang
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    SETUPTOOLS_SCM_PRETEND_VERSION=0.5.16 pip install --no-cache-dir --no-deps -e '/sgl-workspace/sglang/python[all]'
# ---- mooncake's CUDA 13 build with the structured object store miles uses; CUDA 12 keeps the base's, as upstream.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'mooncake-transfer-engine-cuda13==0.3.12.post1 --hash=sha256:4173798950732749113625c2a1f6dd0518bd15e82598a7ecb2b7d5bc8e590b76' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --force-reinstall --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- fake_int4_quant_cuda (int4 QAT export), built from its source in miles' own tree for the variant's GPUs (its
# ---- setup.py alone targets 8.0-9.0, which leaves Blackwell without a kernel).
RUN --mount=type=bind,source=tools,target=/tmp/tools --mount=type=bind,from=src-miles,target=/tmp/src/miles,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    TORCH_CUDA_ARCH_LIST="${CUDA_ARCHS}" python3 /tmp/tools/jobs.py --gib-per-job 4 --cpus-per-job 1 -- pip install --no-cache-dir --no-build-isolation --no-deps /tmp/src/miles/miles/backends/megatron_utils/kernels/int4_qat
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
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'typer==0.25.1 --hash=sha256:75caa44ed46a03fb2dab8808753ffacdbfea88495e74c85a28c5eefcf5f39c89' 'click==8.2.1 --hash=sha256:61a3265b914e850b85317d0b3109c7f8cd35a670f963866005d6ef1d5175a12b' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- The CuTe DSL's users at versions that accept cutlass-dsl 4.6.2 (below): quack-kernels 0.6.5 and nvidia-cudnn-
# ---- frontend 1.32 require 4.7 and 4.8, and with quack 0.6.5 FlashAttention 4's modules (and TransformerEngine's
# ---- attention through them) fail to import.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'quack-kernels==0.6.4 --hash=sha256:e77c5d1f1299b0b38487fe8737df6c6975daa16bca7f7eb883bd1a74d09e7e78' 'nvidia-cudnn-frontend==1.31.0 --hash=sha256:3171f102254136418f24b4470dfa5419f34b03d9d792a4b773cf65c7a37e6bf8' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- Last, over everything else and without deps, so no earlier resolve can move them: apache-tvm-ffi at sglang's
# ---- own pin (cutlass-dsl 4.6 calls make_kwargs_wrapper(map_dataclass_to_tuple=...)); every nvidia-cutlass-dsl
# ---- component at 4.6.2 (4.6.0/4.6.1 hang FA4's CuTe backward on sm_103; the meta-package alone does not move the
# ---- runtime libs).
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    printf '%s\n' 'apache-tvm-ffi==0.1.11 --hash=sha256:2843f084cdc94dedacd8b257a395a2b71b8a3dc7fc99711b148bf1d161983128 --hash=sha256:78aa1857b04a2ea718317041ab3f01288b3d496e6036eb1b99ebdc9da0fdaef5' 'nvidia-cutlass-dsl==4.6.2 --hash=sha256:06ac62deb182a852dfb053032cf945bf02b9aa1bf502a18b129d280d7babb26c' 'nvidia-cutlass-dsl-libs-base==4.6.2 --hash=sha256:24dfaddad6077fd0de14eecaf66a72762f2f5f30ae1872231f5bf8b243ac2eac' 'nvidia-cutlass-dsl-libs-core==4.6.2 --hash=sha256:571d4b46fca1bfbb123d0dc348eaa7fd80af0014ddffc07b849e8195b2364333' 'nvidia-cutlass-dsl-libs-cu12==4.6.2 --hash=sha256:7f510307369d522da8e7d666557b9b9e7df06b94748bd5dc0198d59dfd0d918a' 'nvidia-cutlass-dsl-libs-cu13==4.6.2 --hash=sha256:a299a623fad75eb752c1a4e447b924e9049ed396b037509c41a48da82d1f340a' >/tmp/pip-locked.txt && \
    pip install --no-cache-dir --force-reinstall --no-deps --require-hashes -r /tmp/pip-locked.txt && \
    rm /tmp/pip-locked.txt
# ---- flashinfer's python, cubin and JIT-cache wheels together at 0.6.15.post1 (Blackwell MoE cubin fixes), from
# ---- flashinfer's own indexes as upstream installs them: the default index has no cubin past 0.6.13 and no JIT
# ---- cache.
# not hash-checked: no locked file for flashinfer-cubin==0.6.15.post1, flashinfer-jit-cache==0.6.15.post1 (`build.py lock`; a pin whose index could not be reached stays pending)
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    pip install --no-cache-dir --force-reinstall --no-deps --extra-index-url https://flashinfer.ai/whl --extra-index-url https://flashinfer.ai/whl/"${FLASHINFER_CUDA}" \
    flashinfer-python==0.6.15.post1 \
    flashinfer-cubin==0.6.15.post1 \
    flashinfer-jit-cache==0.6.15.post1

# ---- The attention bridge: its own distribution, installed like any other package (no overlay into miles).
# ---- Late and bind-mounted, so a bridge-only edit rebuilds this step and the gates, nothing before it. The host's CA
# ---- bundle is mounted as a secret on every family (offline ones too), so every build proves it never lands in a layer.
RUN --mount=type=bind,source=bridge,target=/tmp/sglang-attn-bridge,rw --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca GIT_SSL_CAINFO=/run/secrets/pip-ca; fi; \
    python3 -m pip install --no-cache-dir --no-deps --no-build-isolation /tmp/sglang-attn-bridge \
    && test "$(python3 -c 'import importlib.metadata as m, sys; print(sys.implementation.name, m.version("sglang-attn-bridge"))')" = 'cpython 0.2.0'

# ---- The runtime environment, before the gates: the gates judge the image exactly as it will run.
ENV FLASHINFER_VERSION="0.6.15.post1"
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
      org.opencontainers.image.base.name="lmsysorg/sglang:v0.5.16" \
      io.miles.variant="cu13-x86" \
      io.miles.spec-digest="eb6482a95fb6399eb653391dea355b613dba32efd5eb1e68c5d8d86228d918f1"
WORKDIR /root/
CMD ["/bin/bash"]
