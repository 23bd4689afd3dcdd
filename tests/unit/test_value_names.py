"""URLs and file names in their final form: an artifact URL is judged after percent-decoding, a lock's URL must be
the spec's, and a `--source wheels` folder is checked file by file (name, link, content, metadata) before anything
is staged. tests/test_hardening_inject.py proves the same with real builds."""

from __future__ import annotations

import os
import zipfile

import pytest
from support import wheel_bytes

from toolkit.errors import SpecError, UsageError
from toolkit.lock import file as lock_file
from toolkit.plan import artifacts
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_family

SHA = "a" * 64
WHEEL = "torch-2.13.0-py3-none-any.whl"


def family(demo_text, url: str) -> str:
    text = demo_text.replace("steps: [{pip: [torch]}, {source: lib}, patches]", PREBUILT)
    return text.replace("variants:\n", f"artifacts:\n  w: {{url: '{url}', why: a test}}\nvariants:\n")


PREBUILT = "steps: [{pip: [torch], prebuilt: w}, {source: lib}, patches]"
GOOD_URL = f"https://example.com/wheels/{WHEEL}"


def lock(images_dir, url: str, locked_url: str | None = None) -> None:
    data = lock_file.empty("demo")
    data["artifacts"] = {"w": {"policy": {"url": url}, "url": locked_url or url, "size": 3, "sha256": SHA}}
    (images_dir / "demo.lock.json").write_text(lock_file.dumps(data))


@pytest.mark.parametrize(
    "url",
    [
        "https://h/x.bin%0aFROM%20busybox%20AS%20pwn%0aRUN%20echo%20INJECTED%20%3E%20%2Finjected%20%23",
        "https://h/w/a%2F..%2F..%2Fetc%2Fpasswd",
        "https://h/w/%2e%2e/x.whl",
        "https://h/",
        "https://h/..",
        "https://h/a/./x.whl",
        "https://h/x%ff.whl",
        "https://h/x%2500a.whl",  # decodes once to `%00a`: a `%` is no file name character
        "https://h/%E2%80%8Bx.whl",  # a zero-width space, hidden in an escape
        "https://h/x.whl\n",
        "ftp://h/x.whl",
    ],
)
def test_artifact_urls_are_judged_decoded(write_spec, demo_text, images_dir, url):
    assert artifacts.url_problem(url) is not None
    with pytest.raises(SpecError, match=r"images/demo\.yaml: artifacts\.w\.url: ") as e:
        load_family(write_spec(family(demo_text, url)))
    assert "\n" not in str(e.value)


def test_a_plain_url_with_escapes_keeps_its_decoded_name(write_spec, demo_text, images_dir):
    url = "https://example.com/w/torch-2.13.0%2Bcpu-py3-none-any.whl"
    assert artifacts.url_problem(url) is None
    assert artifacts.file_name({"url": url}) == "torch-2.13.0+cpu-py3-none-any.whl"


@pytest.mark.parametrize(
    "locked",
    [
        "https://example.com/wheels/x.bin%0aFROM%20busybox%20AS%20pwn%0aRUN%20echo%20x",
        "https://example.com/other/" + WHEEL,
        "https://h/",
    ],
)
def test_a_lock_url_must_be_the_spec_url(write_spec, demo_text, images_dir, locked):
    lock(images_dir, GOOD_URL, locked)
    with pytest.raises(SpecError, match=r"images/demo\.lock\.json: artifacts\.w\.url: "):
        load_family(write_spec(family(demo_text, GOOD_URL)))


def test_a_release_asset_name_in_the_lock_is_a_file_name(images_dir):
    data = lock_file.empty("demo")
    rec = {"url": "https://example.com/a/x.bin", "size": 1, "sha256": SHA}
    data["artifacts"] = {"r": {"policy": {"release": {"repo": "o/n", "tag": "t"}}, "assets": {"../x\nRUN x": rec}}}
    with pytest.raises(SpecError, match="artifacts.r.assets: not a plain file name"):
        lock_file.check(data, "images/demo.lock.json", "demo")


def write_wheel(folder, name: str, body: bytes | None = None):
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(wheel_bytes("torch", "2.13.0") if body is None else body)
    return folder / name


def corrupt(body: bytes) -> bytes:
    """The wheel with one byte of its module's content changed: the zip directory reads, the CRC does not match."""
    at = body.index(b"WHERE")
    return body[:at] + b"X" + body[at + 1 :]


def mismatched() -> bytes:
    return wheel_bytes("numpy", "2.0.0")


@pytest.mark.parametrize(
    "name, body, problem",
    [
        ("torch-2.13.0-py3-none-any\nUSER nobody\nRUN echo PWNED\nX.whl", None, "not a plain file name"),
        ("x-0.0.9.whl", None, "not a wheel file name"),
        ("torch-2.13.0-py3-none-any.whl", b"not a zip", "not a readable zip archive"),
        ("torch-2.13.0-py3-none-any.whl", "corrupt", "fails its CRC"),
        ("torch-2.13.0-py3-none-any.whl", "mismatched", "its METADATA says numpy 2.0.0, its file name torch 2.13.0"),
        ("torch-2.13.0-py3-none-any.whl", "no metadata", "no single .dist-info/METADATA"),
    ],
)
def test_a_wheels_folder_is_checked_file_by_file(write_spec, demo_text, images_dir, tmp_path, name, body, problem):
    lock(images_dir, GOOD_URL)
    variant = load_family(write_spec(family(demo_text, GOOD_URL)))["a"]
    wheels = tmp_path / "wheels"
    if body == "corrupt":
        body = corrupt(wheel_bytes("torch", "2.13.0"))
    elif body == "mismatched":
        body = mismatched()
    elif body == "no metadata":
        path = tmp_path / "empty.zip"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("torch/__init__.py", "")
        body = path.read_bytes()
    write_wheel(wheels, name, body)
    with pytest.raises(UsageError, match=problem) as e:
        make_plan(variant, revision="r", sources=[f"wheels={wheels}"])
    assert "\n" not in str(e.value)


def test_links_and_folders_in_a_wheels_folder_are_refused(write_spec, demo_text, images_dir, tmp_path):
    lock(images_dir, GOOD_URL)
    variant = load_family(write_spec(family(demo_text, GOOD_URL)))["a"]
    outside = write_wheel(tmp_path / "elsewhere", WHEEL)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    os.symlink(outside, wheels / WHEEL)
    with pytest.raises(UsageError, match="a link"):
        make_plan(variant, revision="r", sources=[f"wheels={wheels}"])
    (wheels / WHEEL).unlink()
    os.symlink("/etc/shadow", wheels / WHEEL)
    with pytest.raises(UsageError, match="a link"):
        make_plan(variant, revision="r", sources=[f"wheels={wheels}"])
    (wheels / WHEEL).unlink()
    (wheels / WHEEL).mkdir()
    with pytest.raises(UsageError, match="not a file"):
        make_plan(variant, revision="r", sources=[f"wheels={wheels}"])
    (wheels / WHEEL).rmdir()
    write_wheel(wheels, WHEEL)
    plan = make_plan(variant, revision="r", sources=[f"wheels={wheels}"])
    assert plan.wheels == (WHEEL,) and f"/tmp/prebuilt-wheels/{WHEEL}" in render(plan)
