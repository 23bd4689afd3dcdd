"""Every `python3 build.py ...` the README and CONTRIBUTING show runs against build.py's real parser: the subcommand
exists and each option it uses is one of that subcommand's. And no markdown says `python` (a stock Debian 12 has
only `python3`)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess

import pytest
from support import ROOT

import build

DOCS = ("README.md", "CONTRIBUTING.md")
COMMAND = re.compile(r"python3 build\.py\b([^&;]*)")  # up to the end, or to the next command of a `&&` or `;` chain
OPTION = re.compile(r"(?<![\w=.-])(--?[A-Za-z][\w-]*)")  # `--flag`, `-o`; not the `-` inside `a-b` or `x=-y`


def shown_commands(text: str) -> list[str]:
    """The arguments after each `python3 build.py`, in fenced blocks (comments dropped; a line ending in `\\` or an
    indented line continues the one before) and in inline `code` spans (which may wrap)."""
    found = []
    for i, part in enumerate(re.split(r"^```.*$", text, flags=re.M)):
        if i % 2:  # inside a fence
            part = re.sub(r"(^|\s)#.*", "", part, flags=re.M)
            lines = re.sub(r"\\?\n[ \t]+|\\\n", " ", part).splitlines()
        else:
            lines = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", part)]
        found += [m.group(1).strip() for line in lines for m in COMMAND.finditer(line)]
    return found


def subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


CASES = [(doc, command) for doc in DOCS for command in shown_commands((ROOT / doc).read_text())]


def test_the_readme_shows_its_commands():
    assert sum(doc == "README.md" for doc, _ in CASES) >= 10, "the extraction found (almost) nothing"


@pytest.mark.parametrize(("doc", "command"), CASES, ids=[f"{d}: {c[:60]}" for d, c in CASES])
def test_a_shown_command_fits_the_parser(doc, command):
    words = command.split()
    name = "build" if not words or words[0].startswith("--target") else words[0]  # as build.main reads it
    commands = subcommands()
    assert name in commands, f"{doc}: `python3 build.py {command}`: no subcommand {name!r}"
    known = set(commands[name]._option_string_actions) | set(build.parser()._option_string_actions)
    unknown = [flag for flag in OPTION.findall(command) if flag not in known]
    assert not unknown, f"{doc}: `python3 build.py {command}`: {name} has no option {', '.join(unknown)}"


def markdown_files():
    """The project's own markdown: what git tracks (not a staged upstream tree under build/), less the goldens."""
    listed = subprocess.run(["git", "ls-files", "-z", "*.md"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in listed.decode().split("\0"):
        if rel and not rel.startswith("tests/golden/"):
            yield os.path.join(ROOT, rel)


def test_no_markdown_says_python_for_python3():
    bad = []
    for path in markdown_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(path, ROOT)
        bad += [f"{rel}: python build.py"] * ("python build.py" in text)
        bad += [f"{rel}: {line.strip()}" for line in text.splitlines() if line.lstrip().startswith("python -m")]
    assert not bad, "stock Debian 12 has no `python`; write python3:\n" + "\n".join(bad)
