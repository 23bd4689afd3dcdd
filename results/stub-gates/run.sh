#!/usr/bin/env bash
# The CPU-container proof of the stub-import gate on the real sglang-kernel wheel (results/stub-gates/README.md).
# Reads the wheels' install and the driver stub from .cache/stub-gates/ (kept out of git); writes *.out beside it.
set -uo pipefail
cd "$(dirname "$0")/../.."
S=$PWD/.cache/stub-gates
OUTDIR=results/stub-gates
IMAGE=${IMAGE:-miles-base:bookworm-minbase-py311-git-gxx}
run() {  # run NAME CMD...: the command in a driverless, networkless container; its output and exit code recorded
    local name=$1; shift
    docker run --rm --network none -v "$S/site:/site:ro" -v "$S/libcuda.so:/usr/local/cuda/lib64/stubs/libcuda.so:ro" \
        -v "$PWD/verify:/gates/verify:ro" -v "$PWD/$OUTDIR:/gates/cfg:ro" -e PYTHONPATH=/site -w /gates "$IMAGE" "$@" \
        >"$OUTDIR/$name.out" 2>&1
    echo "exit $?" >>"$OUTDIR/$name.out"
    tail -n 3 "$OUTDIR/$name.out"
}
# 1. the gate: sgl_kernel imported against the stub, in the child only
run stub-import python3 -m verify --config cfg/gates.json
# 2. the same module as a plain import (no stub): it cannot load its op library
run plain-import python3 -m verify --config cfg/plain.json
# 3. a broken copy: sgl_kernel with the op library it loads here (sm100/common_ops) deleted, first on the path
run broken-copy bash -c 'set -e; mkdir /tmp/b; cp -rs /site/sgl_kernel /tmp/b/; rm /tmp/b/sgl_kernel/sm100/common_ops.abi3.so
    PYTHONPATH=/tmp/b:/site exec python3 -m verify --config cfg/gates.json'
# 4. what the import registers against the stub (the ops sglang calls)
run ops bash -c 'set -e; mkdir /tmp/l; ln -s /usr/local/cuda/lib64/stubs/libcuda.so /tmp/l/libcuda.so.1
    LD_LIBRARY_PATH=/tmp/l exec python3 -c "import torch, sgl_kernel; print(torch.__version__, sgl_kernel.__version__, [n for n in (\"rmsnorm\", \"silu_and_mul\", \"topk_softmax\") if hasattr(torch.ops.sgl_kernel, n)])"'
# 5. TransformerEngine's core and mooncake's store and engine, installed as an image has them (one dist-packages:
#    TE finds cuDNN and NVRTC there) in the base plus the libraries mooncake links (libcurl4, libibverbs1,
#    librdmacm1, libnuma1, ibverbs-providers: in the CUDA bases, not in this CPU base)
IMAGE=${IMAGE_LIBS:-miles-stubgate:curl}
run2() {
    local name=$1; shift
    docker run --rm --network none -v "$S/site-all:/usr/local/lib/python3.11/dist-packages:ro" \
        -v "$S/libcuda.so:/usr/local/cuda/lib64/stubs/libcuda.so:ro" -v "$PWD/verify:/gates/verify:ro" \
        -v "$PWD/$OUTDIR:/gates/cfg:ro" -w /gates "$IMAGE" "$@" >"$OUTDIR/$name.out" 2>&1
    echo "exit $?" >>"$OUTDIR/$name.out"
    tail -n 6 "$OUTDIR/$name.out"
}
run2 others-stub-import python3 -m verify --config cfg/others.json
run2 others-plain-import python3 -m verify --config cfg/others-plain.json
