"""Checksum-pinned artifacts in a spec, in-process: a pending artifact leaves its step to the source build (or out),
a locked one becomes a fetch stage with the lock's digest that only the step using it mounts, `--source wheels=DIR`
beats both, and each choice reaches the labels and the input hash. The real fetch (and a wrong digest failing the
build) is tests/test_artifact_build.py."""

from __future__ import annotations

import pytest
from support import wheel_bytes

from toolkit.errors import SpecError, UsageError
from toolkit.lock import file as lock_file
from toolkit.plan.build_plan import make_plan
from toolkit.render.context import build_labels, plan_hash
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_family

WHEEL = "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
URL = f"https://example.com/wheels/{WHEEL}"
SHA = "a" * 64
RUST = "rust-1.94.0-x86_64-unknown-linux-gnu.tar.gz"


def family(demo_text, steps: str, artifacts: dict, pip: str = "{torch: 2.13.0}") -> str:
    lines = "".join(f"  {name}: {{url: {url}, why: a test}}\n" for name, url in artifacts.items())
    text = demo_text.replace("steps: [{pip: [torch]}, {source: lib}, patches]", f"steps: {steps}")
    text = text.replace("pip: {torch: 2.13.0}", f"pip: {pip}")
    return text.replace("variants:\n", f"artifacts:\n{lines}variants:\n") if lines else text


def lock(images_dir, **records):
    data = lock_file.empty("demo")
    data["artifacts"] = {n: {"policy": {"url": u}, "url": u, "size": 3, "sha256": SHA} for n, u in records.items()}
    lock_file.write(images_dir / "demo.lock.json", data)


def labels(plan):
    class Ctx:
        input_hash, sources = "h", ()

    return build_labels(plan, Ctx())


PREBUILT = "[{pip: [torch], prebuilt: torch_wheel}, {source: lib}, patches]"


def test_a_pending_wheel_leaves_the_step_to_its_source_build(write_spec, demo_text):
    variant = load_family(write_spec(family(demo_text, PREBUILT, {"torch_wheel": URL})))["a"]
    assert variant.artifacts == {"torch_wheel": {"pending": True, "url": URL}}
    plan = make_plan(variant, revision="r")
    text = render(plan)
    assert "ADD --checksum" not in text and "FROM scratch" not in text and "torch==2.13.0" in text
    got = labels(plan)
    assert got["io.miles.build.torch"] == "built from source (artifact torch_wheel is pending in the lock)"
    assert got["io.miles.source.torch_wheel"].startswith(f"pending: {URL} is not in the lock")


def test_a_locked_wheel_is_fetched_by_digest_in_its_own_stage_and_mounted_by_its_step(
    write_spec, demo_text, images_dir
):
    path = write_spec(family(demo_text, PREBUILT, {"torch_wheel": URL}))
    pending = make_plan(load_family(path)["a"], revision="r")
    lock(images_dir, torch_wheel=URL)
    plan = make_plan(load_family(path)["a"], revision="r")
    text = render(plan)
    assert f'FROM scratch AS art-torch-wheel\nADD --checksum=sha256:{SHA} ["{URL}", "/{WHEEL}"]\n' in text
    assert text.index("FROM scratch") < text.index("FROM debian:12")
    install = [ln for ln in text.splitlines() if "art-torch-wheel,target=" in ln]
    assert (
        len(install) == 1 and "--mount=type=bind,from=art-torch-wheel,target=/tmp/artifacts/torch_wheel" in install[0]
    )
    assert f"--no-deps /tmp/artifacts/torch_wheel/{WHEEL}" in text and "torch==2.13.0" not in text
    assert labels(plan)["io.miles.build.torch"] == f"prebuilt wheel {WHEEL} (artifact torch_wheel)"
    assert labels(plan)["io.miles.source.torch_wheel"] == f"{URL} sha256:{SHA}"
    assert plan_hash(plan, text) != plan_hash(pending, render(pending))


def test_a_wheels_folder_beats_the_artifact_and_is_hashed_by_content(write_spec, demo_text, images_dir, tmp_path):
    lock(images_dir, torch_wheel=URL)
    variant = load_family(write_spec(family(demo_text, PREBUILT, {"torch_wheel": URL})))["a"]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch-2.13.0-cp311-cp311-linux_x86_64.whl").write_bytes(wheel_bytes("torch", "2.13.0", "one"))
    (wheels / "README").write_text("not a wheel")
    plan = make_plan(variant, revision="r", sources=[f"wheels={wheels}"])
    assert plan.wheels == ("torch-2.13.0-cp311-cp311-linux_x86_64.whl",)
    text = render(plan)
    assert "FROM scratch" not in text
    assert "--mount=type=bind,from=src-wheels,target=/tmp/prebuilt-wheels" in text
    assert "/tmp/prebuilt-wheels/torch-2.13.0-cp311-cp311-linux_x86_64.whl" in text
    assert labels(plan)["io.miles.build.torch"].endswith("from --source wheels")

    (wheels / "numpy-2.0.0-cp311-cp311-linux_x86_64.whl").write_bytes(wheel_bytes("numpy", "2.0.0"))
    with pytest.raises(UsageError, match="numpy-2.0.0.* replaces no prebuilt step of a \\(torch\\)"):
        make_plan(variant, revision="r", sources=[f"wheels={wheels}"])
    (wheels / "numpy-2.0.0-cp311-cp311-linux_x86_64.whl").unlink()
    (wheels / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(wheel_bytes("torch", "2.13.0", "two"))
    with pytest.raises(UsageError, match="are both torch; keep one"):
        make_plan(variant, revision="r", sources=[f"wheels={wheels}"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="holds no wheel"):
        make_plan(variant, revision="r", sources=[f"wheels={empty}"])


def test_an_artifact_step_installs_the_file_or_is_left_out_while_pending(write_spec, demo_text, images_dir):
    url = "https://example.com/rocr/libhsa-runtime64.so.1.18.70200.vmmfix"
    steps = (
        "[{pip: [torch]}, {source: lib}, patches, {artifact: fix, over: /opt/rocm/lib/libhsa-runtime64.so.1,"
        " expect: libhsa-runtime64.so.1.18.70200}]"
    )
    path = write_spec(family(demo_text, steps, {"fix": url}))
    text = render(make_plan(load_family(path)["a"], revision="r"))
    assert "# artifact fix is pending in the lock" in text and "readlink" not in text
    lock(images_dir, fix=url)
    text = render(make_plan(load_family(path)["a"], revision="r"))
    assert "FROM scratch AS art-fix" in text
    run = text[text.index("RUN --mount=type=bind,from=art-fix") :]
    assert "readlink -f /opt/rocm/lib/libhsa-runtime64.so.1" in run
    assert "!= libhsa-runtime64.so.1.18.70200 ]" in run and 'cp -a "$target" "$target.orig"' in run


@pytest.mark.parametrize(
    "steps, artifacts, pip, problem",
    [
        (
            "[{pip: [torch]}, {source: lib}, patches]",
            {"w": URL},
            "{torch: 2.13.0}",
            "artifacts.w: no step installs it",
        ),
        (
            "[{pip: [torch], prebuilt: w}, {source: lib}, patches]",
            {"w": "https://example.com/torch-2.12.0-py3-none-any.whl"},
            "{torch: 2.13.0}",
            "steps\\[0\\].prebuilt: 'torch-2.12.0-py3-none-any.whl' is not the wheel of torch==2.13.0",
        ),
        (
            "[{pip: [torch], prebuilt: w}, {source: lib}, patches]",
            {"w": "https://example.com/torch.tar.gz"},
            "{torch: 2.13.0}",
            "is not a wheel",
        ),
        (
            "[{pip: [torch], prebuilt: nope}, {source: lib}, patches]",
            {},
            "{torch: 2.13.0}",
            "'nope' is not an artifact of the family",
        ),
        (
            "[{pip: [torch]}, {source: lib, into: /opt/lib, prebuilt: w}, patches]",
            {"w": URL},
            "{torch: 2.13.0}",
            "a tree that stays in the image",
        ),
        (
            "[{pip: [torch]}, {source: lib}, patches, {artifact: w, over: /opt/x}]",
            {"w": URL},
            "{torch: 2.13.0}",
            "`over` needs `expect`",
        ),
        (
            "[{pip: [torch]}, {source: lib}, patches, {artifact: w}]",
            {"w": URL},
            "{torch: 2.13.0}",
            "exactly one of `to`",
        ),
        (
            "[{pip: [torch]}, {cargo: lib, toolchain: {x86_64: rust}, bins: [gw], to: /usr/local/bin}, patches]",
            {"rust": f"https://example.com/{RUST}"},
            "{torch: 2.13.0}",
            "artifact rust is pending in the lock; lock it first",
        ),
        (
            "[{pip: [torch]}, {cargo: lib, toolchain: {riscv: rust}, bins: [gw], to: /usr/local/bin}, patches]",
            {"rust": f"https://example.com/{RUST}"},
            "{torch: 2.13.0}",
            "toolchain.riscv: one of x86_64, aarch64",
        ),
        (
            "[{pip: [torch]}, {cargo: lib, toolchain: {x86_64: rust}, python: py}, patches]",
            {"rust": f"https://example.com/{RUST}"},
            "{torch: 2.13.0}",
            "needs a `maturin` pin",
        ),
    ],
)
def test_bad_artifact_steps_are_one_line_spec_errors(write_spec, demo_text, images_dir, steps, artifacts, pip, problem):
    if "pending" not in problem:
        lock(images_dir, **artifacts)
    with pytest.raises(SpecError, match=problem):
        load_family(write_spec(family(demo_text, steps, artifacts, pip)))


def test_a_cargo_step_builds_with_the_locked_toolchain_of_its_platform_and_removes_it(
    write_spec, demo_text, images_dir
):
    arm = "rust-1.94.0-aarch64-unknown-linux-gnu.tar.gz"
    rust = {"rust_x86": f"https://example.com/{RUST}", "rust_arm": f"https://example.com/{arm}"}
    steps = (
        "[{pip: [torch, maturin]}, {cargo: lib, toolchain: {x86_64: rust_x86, aarch64: rust_arm},"
        " bins: [sgl-model-gateway], features: [vendored-openssl], to: /usr/local/bin, python: bindings/python},"
        " patches]"
    )
    lock(images_dir, **rust)
    variants = load_family(write_spec(family(demo_text, steps, rust, "{torch: 2.13.0, maturin: 1.9.6}")))
    text = render(make_plan(variants["a"], revision="r"))  # linux/amd64: only the x86_64 release is fetched
    assert text.count("FROM scratch AS art-rust-") == 1 and "FROM scratch AS art-rust-x86" in text
    run = text[text.index("RUN --mount=type=bind,from=src-lib,target=/tmp/src/lib,rw") :]
    assert f"x86_64) toolchain=/tmp/artifacts/rust_x86/{RUST} ;;" in run and "aarch64)" not in run
    assert "cargo build --release --manifest-path /tmp/src/lib/Cargo.toml --bin sgl-model-gateway" in run
    assert "--features vendored-openssl" in run and "MATURIN_PEP517_ARGS='--features vendored-openssl'" in run
    assert "install -m 0755 /tmp/cargo-target/release/sgl-model-gateway /usr/local/bin/sgl-model-gateway" in run
    assert "rm -rf /tmp/rust-dist /tmp/rust /tmp/cargo-home /tmp/cargo-target" in run
    assert "curl" not in run and "rustup" not in run
    text = render(make_plan(variants["b"], revision="r"))  # linux/arm64
    assert "FROM scratch AS art-rust-arm" in text and "art-rust-x86" not in text
    assert f"aarch64) toolchain=/tmp/artifacts/rust_arm/{arm} ;;" in text


def test_a_cargo_step_needs_a_toolchain_for_every_platform(write_spec, demo_text, images_dir):
    rust = {"rust_x86": f"https://example.com/{RUST}"}
    steps = "[{pip: [torch]}, {cargo: lib, toolchain: {x86_64: rust_x86}, bins: [gw], to: /usr/local/bin}, patches]"
    lock(images_dir, **rust)
    with pytest.raises(SpecError, match="steps\\[1\\].toolchain: no toolchain for the variant's platform linux/arm64"):
        load_family(write_spec(family(demo_text, steps, rust)))
