"""toolkit/gates/reproduce.py's pure part: layers read from real tar streams, compared file by file; content
differences are named before differences of time alone, and a layer only one image has counts in full."""

import dataclasses
import gzip
import hashlib
import io
import tarfile

from toolkit.gates.reproduce import (
    Image,
    compare,
    differing_layers,
    layer_blob,
    layer_entries,
    report_lines,
    step_name,
)


def _layer(files: dict, mtime=1000) -> dict:
    """{path: Entry} of a real tar holding `files` ({path: bytes, or None for a folder})."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, body in files.items():
            info = tarfile.TarInfo(path)
            info.mtime = mtime
            if body is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(body), 0o644
                tar.addfile(info, io.BytesIO(body))
    buf.seek(0)
    with tarfile.open(fileobj=buf, mode="r|") as tar:
        return layer_entries(tar)


def test_the_same_image_id_is_reproduced_and_reads_no_layer():
    a = Image("sha256:aa", ("sha256:1",), ("RUN x",))
    c = compare(a, Image("sha256:aa", ("sha256:1",), ("RUN x",)))
    assert c.same_id and report_lines(c, a) == ["reproduced: the rebuild is the same image (sha256:aa)"]


def test_time_only_differences_are_counted_and_named_as_such():
    files = {"opt": None, "opt/x.py": b"print(1)\n"}
    steps = ("ADD", "RUN pip install x")
    a = Image("sha256:a", ("sha256:base", "sha256:l1"), steps, {"sha256:l1": _layer(files)})
    b = Image("sha256:b", ("sha256:base", "sha256:l2"), steps, {"sha256:l2": _layer(files, 2000)})
    assert differing_layers(a.layers, b.layers) == {"sha256:l1", "sha256:l2"}
    c = compare(a, b)
    assert not c.same_id and c.first_content is None
    assert c.layers[0].index == 2 and c.layers[0].times == 2 and c.layers[0].content == ()
    lines = report_lines(c, a)
    assert lines[0].startswith("not reproduced: 1 of 2 layers differ, in file modification times only")
    assert lines[1] == "  layer 2 (RUN pip install x): 2 file(s) in time only"


def test_a_changed_file_and_an_added_layer_are_content_named_first():
    a = Image(
        "sha256:a",
        ("sha256:l1", "sha256:hand"),
        ("RUN make", "bash"),
        {
            "sha256:l1": _layer({"opt/a": b"one", "opt/b": b"same"}),
            "sha256:hand": _layer({"etc": None, "etc/motd": b"hi"}),
        },
    )
    b = Image("sha256:b", ("sha256:l2",), ("RUN make",), {"sha256:l2": _layer({"opt/a": b"two", "opt/b": b"same"})})
    c = compare(a, b)
    assert c.first_content.index == 1 and c.first_content.content == (("opt/a", "content"),)
    only = "in a layer only the image has"
    assert c.layers[1].content == (("etc/motd", only), ("etc", only))  # the file first, its folder after
    lines = report_lines(c, a)
    assert lines[0] == "not reproduced: layer 1 differs first in content: opt/a (content)"
    assert "    etc/motd: in a layer only the image has" in lines


def test_a_file_only_one_side_holds_and_a_mode_change_are_named():
    a = Image("sha256:a", ("sha256:x",), ("",), {"sha256:x": _layer({"a": b"1", "b": b"2"})})
    b_files = _layer({"a": b"1"})
    b_files["a"] = dataclasses.replace(b_files["a"], mode=0o600)
    b = Image("sha256:b", ("sha256:y",), ("",), {"sha256:y": b_files})
    assert compare(a, b).layers[0].content == (("a", "mode"), ("b", "only in the image"))


def test_the_step_is_shown_as_its_command():
    made = "RUN |2 SOURCE_DATE_EPOCH=1787049764 N=ab /bin/bash -o pipefail -c python3 -m venv /opt/venv"
    assert step_name(made) == "RUN python3 -m venv /opt/venv"
    assert len(step_name("RUN " + "x" * 200)) == 90


def test_a_compressed_layer_blob_is_known_by_its_diff_id_and_only_a_wanted_one_is_kept():
    """The containerd store's `docker save` names a layer by its gzip blob's digest: the diff ID (the sha256 of
    the uncompressed tar) is what the image's config lists, so it is computed while the layer is read."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("opt/x.py")
        info.size, info.mode, info.mtime = 9, 0o644, 7
        tar.addfile(info, io.BytesIO(b"print(1)\n"))
    plain = buf.getvalue()
    diff_id = "sha256:" + hashlib.sha256(plain).hexdigest()
    packed = gzip.compress(plain, mtime=0)
    blob = "sha256:" + hashlib.sha256(packed).hexdigest()

    def read(data: bytes, wanted: set, named: str):
        return layer_blob(io.BufferedReader(io.BytesIO(data)), wanted, named)

    found, entries = read(packed, {diff_id}, blob)
    assert found == diff_id and entries["opt/x.py"].sha256 == hashlib.sha256(b"print(1)\n").hexdigest()
    assert read(packed, set(), blob) == (diff_id, None)
    assert read(plain, {diff_id}, diff_id)[1]["opt/x.py"].mtime == 7  # the classic store: plain, named by diff ID
    assert read(plain, set(), diff_id) == (diff_id, None)
