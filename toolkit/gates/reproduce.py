"""`build.py verify --reproduce`: rebuild an image from its own inputs with `--no-cache` and say whether it came out
the same, and where not, which layer and which files differ.

The rebuild is the target's build with the image's labels (so a later commit of the toolkit with the same input
hash names the same revision); it is refused unless this tree's inputs give the image's input hash. It tags
nothing, and the rebuilt image is removed afterwards. The same image ID is a pass. Otherwise both images are read
back with `docker save` and each pair of layers that differ is compared file by file: a file whose content, type,
mode, owner or link differs, or that only one holds, is a content difference; one whose modification time alone
differs is a time difference (what an image store that cannot rewrite timestamps leaves: docs/architecture.md,
"Build clock"). `compare` is the pure part: two images' layers in, the findings out.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import cast

SHOWN = 10  # files named per layer
_KINDS = {tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "link"}
_KINDS[tarfile.LNKTYPE] = "hardlink"
# The history's `RUN |2 A=1 B=2 /bin/bash -o pipefail -c CMD`: the build args and the shell, before the command.
_RUN_PREFIX = re.compile(r"^RUN \|\d+(?: \S+=\S*)* (?:/bin/(?:ba)?sh(?: -o pipefail)? -c )?")


def step_name(created_by: str) -> str:
    """A layer's step as a reader knows it from the Dockerfile: `RUN CMD`, on one line, at most 90 characters."""
    text = " ".join(created_by.split())
    text = _RUN_PREFIX.sub("RUN ", text)
    return text if len(text) <= 90 else text[:89] + "…"


@dataclass(frozen=True)
class Entry:
    """One file of a layer, as the layer's tar holds it."""

    kind: str
    mode: int
    owner: tuple
    size: int
    sha256: str | None  # a regular file's content
    link: str
    mtime: int

    def same_but_time(self, other: Entry) -> bool:
        return (self.kind, self.mode, self.owner, self.size, self.sha256, self.link) == (
            other.kind,
            other.mode,
            other.owner,
            other.size,
            other.sha256,
            other.link,
        )


@dataclass(frozen=True)
class Image:
    """What the comparison needs of one image: its ID, its layers' diff IDs, the step that made each layer, and
    the files of the layers asked for."""

    id: str
    layers: tuple  # diff IDs, bottom first
    steps: tuple  # the history's created_by of each layer, same order ("" when unknown)
    files: dict = field(default_factory=dict)  # diff ID -> {path: Entry}


@dataclass(frozen=True)
class LayerDiff:
    index: int  # 1-based, bottom first
    step: str
    content: tuple  # (path, what differs)
    times: int  # files whose modification time alone differs


@dataclass(frozen=True)
class Comparison:
    same_id: bool
    layers: tuple  # LayerDiff, bottom first, for every layer that differs

    @property
    def first_content(self) -> LayerDiff | None:
        return next((d for d in self.layers if d.content), None)


def layer_entries(layer: tarfile.TarFile) -> dict:
    """{path: Entry} of a layer's tar, read as a stream."""
    out = {}
    for m in layer:
        digest = None
        if m.isreg():
            f = layer.extractfile(m)
            h = hashlib.sha256()
            while f is not None and (block := f.read(1 << 20)):
                h.update(block)
            digest = h.hexdigest()
        kind = _KINDS.get(m.type, m.type.decode("ascii", "replace"))
        out[m.name.rstrip("/")] = Entry(kind, m.mode, (m.uid, m.gid), m.size, digest, m.linkname, int(m.mtime))
    return out


def compare(a: Image, b: Image) -> Comparison:
    """Each layer position where `a` and `b` differ: the files whose content differs, or that one holds and the
    other doesn't (folders last), and how many differ in time alone. A layer one image has and the other lacks
    counts as all its files differing."""
    if a.id == b.id:
        return Comparison(True, ())
    diffs = []
    for i in range(max(len(a.layers), len(b.layers))):
        la = a.layers[i] if i < len(a.layers) else None
        lb = b.layers[i] if i < len(b.layers) else None
        if la == lb:
            continue
        fa = a.files.get(la, {}) if la else {}
        fb = b.files.get(lb, {}) if lb else {}
        content, times = [], 0
        for path in sorted(set(fa) | set(fb)):
            ea, eb = fa.get(path), fb.get(path)
            if ea is None:
                content.append((path, "only in the rebuild" if la else "in a layer only the rebuild has"))
            elif eb is None:
                content.append((path, "only in the image" if lb else "in a layer only the image has"))
            elif ea == eb:
                continue
            elif ea.same_but_time(eb):
                times += 1
            else:
                content.append((path, _what(ea, eb)))
        # Files before folders (a folder differs mostly because a file in it does), each in path order.
        content.sort(key=lambda pw: (_kind(fa, fb, pw[0]) == "dir", pw[0]))
        step = (a.steps[i] if la and i < len(a.steps) else "") or (b.steps[i] if lb and i < len(b.steps) else "")
        diffs.append(LayerDiff(i + 1, step, tuple(content), times))
    return Comparison(False, tuple(diffs))


def _kind(fa: dict, fb: dict, path: str) -> str:
    return (fa.get(path) or fb[path]).kind


def _what(a: Entry, b: Entry) -> str:
    for name in ("kind", "sha256", "size", "mode", "owner", "link"):
        if getattr(a, name) != getattr(b, name):
            return "content" if name in ("sha256", "size") else name
    return "content"


def report_lines(c: Comparison, a: Image) -> list[str]:
    """What `verify --reproduce` prints: the verdict, then per differing layer what differs."""
    if c.same_id:
        return [f"reproduced: the rebuild is the same image ({a.id[:19]})"]
    first = c.first_content
    total = max(len(a.layers), 1)
    if first is None:
        lines = [
            f"not reproduced: {len(c.layers)} of {total} layers differ, in file modification times only "
            "(the same files, contents, modes and owners)"
        ]
    else:
        path, what = first.content[0]
        lines = [f"not reproduced: layer {first.index} differs first in content: {path} ({what})"]
    for d in c.layers:
        said = f"  layer {d.index}" + (f" ({step_name(d.step)})" if d.step else "")
        parts = [f"{len(d.content)} file(s) differ in content"] if d.content else []
        parts += [f"{d.times} file(s) in time only"] if d.times else []
        lines.append(f"{said}: {', '.join(parts) or 'layer digests differ'}")
        for path, what in d.content[:SHOWN]:
            lines.append(f"    {path}: {what}")
        if len(d.content) > SHOWN:
            lines.append(f"    … and {len(d.content) - SHOWN} more")
    return lines


# ---- reading images back from the engine


class _ChunkReader(io.RawIOBase):
    """A file over the SDK's chunk generator, for tarfile's stream mode."""

    def __init__(self, chunks: Iterable[bytes]):
        self.chunks: Iterator[bytes] = iter(chunks)
        self.left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while not self.left:
            try:
                self.left = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(buf), len(self.left))
        buf[:n] = self.left[:n]
        self.left = self.left[n:]
        return n


class _Hashing(io.RawIOBase):
    """A reader that hashes what passes through it: a layer's diff ID is the sha256 of its uncompressed tar."""

    def __init__(self, raw):
        self.raw, self.sha = raw, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        data = self.raw.read(len(buf))
        self.sha.update(data)
        buf[: len(data)] = data
        return len(data)


def layer_blob(f, wanted: set, named: str) -> tuple:
    """(diff ID, {path: Entry} or None) of a layer blob, plain or gzip (`named`: the blob's own digest, which is
    its diff ID when it is plain). A plain layer is read file by file only when wanted; a compressed one is read
    whole, since which layer it is shows only at its end, and kept only when wanted."""
    if f.peek(2)[:2] != b"\x1f\x8b":  # plain: named by its diff ID (the classic image store's `docker save`)
        if named not in wanted:
            return named, None
        with tarfile.open(fileobj=f, mode="r|") as layer:
            return named, layer_entries(layer)
    hashing = _Hashing(gzip.GzipFile(fileobj=f, mode="rb"))
    stream = io.BufferedReader(hashing, buffer_size=1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as layer:
        entries = layer_entries(layer)  # which layer it is shows only at its end
    while stream.read(1 << 20):
        pass
    diff_id = "sha256:" + hashing.sha.hexdigest()
    return diff_id, (entries if diff_id in wanted else None)


def read_image(client, ref: str, wanted: set) -> Image:
    """The image `ref` from the engine: its ID, layers and steps from its config, and the files of the layers
    whose diff IDs are in `wanted`, streamed out of `docker save` (its OCI layout: the classic image store keeps a
    layer uncompressed under its diff ID, the containerd store gzip-compressed under the blob's digest)."""
    attrs = client.api.inspect_image(ref)
    image_id, layers = attrs["Id"], tuple(attrs.get("RootFS", {}).get("Layers") or ())
    if not wanted:  # nothing to compare: no `docker save`
        return Image(image_id, layers, ("",) * len(layers))
    files: dict = {}
    documents: dict = {}  # digest -> a JSON blob (config, manifest, index)
    manifest: list = []
    stream = io.BufferedReader(_ChunkReader(client.api.get_image(image_id)), buffer_size=1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as outer:
        for member in outer:
            extracted = outer.extractfile(member) if member.isreg() else None
            if extracted is None:
                continue
            f = cast(io.BufferedReader, extracted)  # tarfile's member reader is buffered: it peeks
            if member.name == "manifest.json":
                manifest = json.loads(f.read())
            elif member.name.startswith("blobs/sha256/"):
                digest = "sha256:" + member.name.rsplit("/", 1)[-1]
                if f.peek(1)[:1] == b"{":
                    documents[digest] = json.loads(f.read())
                else:
                    diff_id, entries = layer_blob(f, wanted, digest)
                    if entries is not None:
                        files.setdefault(diff_id, entries)
    config_path = (manifest[0].get("Config") or "") if manifest else ""
    config = documents.get("sha256:" + config_path.rsplit("/", 1)[-1]) or documents.get(image_id) or {}
    steps = tuple(h.get("created_by", "") for h in config.get("history", []) if not h.get("empty_layer"))
    if len(steps) != len(layers):
        steps = ("",) * len(layers)
    return Image(image_id, layers, steps, files)


def differing_layers(a_layers: tuple, b_layers: tuple) -> set:
    """The diff IDs worth reading: each layer at a position where the two differ."""
    out: set = set()
    for i in range(max(len(a_layers), len(b_layers))):
        la = a_layers[i] if i < len(a_layers) else None
        lb = b_layers[i] if i < len(b_layers) else None
        if la != lb:
            out.update(x for x in (la, lb) if x)
    return out
