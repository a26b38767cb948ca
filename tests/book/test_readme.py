"""The README's commands exist: make targets, robattr subcommands and options, files."""
from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def sections(text: str) -> dict[str, str]:
    """``{heading: body}`` for the ``## `` sections of a Markdown text."""
    parts = re.split(r"^## +(.+?)\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def fenced_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)


def inline_code(text: str) -> list[str]:
    without_blocks = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.findall(r"`([^`\n]+)`", without_blocks)


def code_lines(text: str) -> list[str]:
    """Every line of code: the lines of fenced blocks (comments dropped) and inline spans."""
    lines = []
    for block in fenced_blocks(text):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line:
                lines.append(line)
    return lines + [span.strip() for span in inline_code(text)]


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, flags=re.M))


def robattr_parser() -> argparse.ArgumentParser:
    from robattr.book.cli import _parser

    return _parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("robattr's parser has no subcommands")


def robattr_commands() -> list[list[str]]:
    """The arguments of every ``robattr ...`` command in the README's code."""
    out = []
    for line in code_lines(README):
        m = re.match(r"^(?:\.venv/bin/)?robattr\s+(.*)$", line)
        if m:
            out.append(shlex.split(m.group(1)))
    return out


def test_quick_start_has_the_two_commands_in_a_code_block():
    quick = sections(README).get("Quick start")
    assert quick is not None, "README.md has no '## Quick start' section"
    blocks = fenced_blocks(quick)
    assert any(re.search(r"^make book\b", b, flags=re.M) and re.search(r"^make test\b", b, flags=re.M)
               for b in blocks), "the quick start needs one code block with `make book` and `make test`"
    assert "book/_build/html/index.html" in quick
    for prerequisite in ("Python 3.11", "npm", "make"):
        assert prerequisite in quick


def test_every_make_target_named_is_a_makefile_target():
    named = set()
    for line in code_lines(README):
        named |= set(re.findall(r"(?:^|[\s;&(])make\s+([A-Za-z][\w-]*)(?![\w=])", line))
    assert {"book", "test"} <= named
    missing = sorted(named - makefile_targets())
    assert not missing, f"README names make targets the Makefile lacks: {missing}"


def test_every_robattr_subcommand_named_exists():
    subs = subcommands(robattr_parser())
    commands = robattr_commands()
    named = {args[0] for args in commands if args}
    assert {"list", "run", "build", "sweep"} <= named
    missing = sorted(named - set(subs))
    assert not missing, f"README names robattr subcommands that do not exist: {missing}"
    # prose such as "`robattr run`, `build` and `sweep`" also names subcommands
    prose = set(re.findall(r"`robattr (\w+)`", README))
    assert prose <= set(subs), f"unknown subcommands in prose: {sorted(prose - set(subs))}"


def test_every_robattr_command_line_parses():
    """Each full command in the README's code is accepted by robattr's own parser."""
    parser = robattr_parser()
    checked = 0
    for args in robattr_commands():
        if len(args) < 2 and args and args[0] in ("run", "sweep"):
            continue                    # "`robattr run`" in prose: no notebook given
        try:
            parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"README command does not parse: robattr {shlex.join(args)}")
        checked += 1
    assert checked >= 8


def test_every_benchmark_named_exists():
    named = set(re.findall(r"benchmarks/[\w-]+\.py", README))
    assert named, "README names no benchmark"
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"README names benchmarks that do not exist: {missing}"


def test_every_repository_file_named_exists():
    named = set()
    for span in inline_code(README):
        for path in re.findall(r"[\w./-]+\.(?:py|txt|yml|toml|md|cfg)\b", span):
            if not path.startswith(("out.", "/")) and "<" not in span:
                named.add(path)
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"README names files that do not exist: {missing}"


def test_every_environment_variable_named_is_read_by_robattr():
    source = "\n".join(p.read_text() for p in (ROOT / "robattr").rglob("*.py"))
    named = set(re.findall(r"\bROBATTR_[A-Z_]+\b", README))
    assert {"ROBATTR_DATA", "ROBATTR_CACHE"} <= named
    unread = sorted(v for v in named if v not in source)
    assert not unread, f"README names variables robattr never reads: {unread}"


def test_dataset_layout_matches_robattr_data():
    from robattr import catalog, data

    for folder in ("MNIST/raw", "FashionMNIST/raw", "cifar-10-batches-py", "cifar10-jpg",
                   "flowers-102"):
        assert folder in README and folder in (ROOT / "robattr" / "data.py").read_text()
    for name in catalog.DATASETS:
        if name != "digits":
            assert f"({name})" in README, f"README's data layout does not show {name}"
    assert "download=True" in README
    assert "download" in data.load.__code__.co_varnames


def test_intro_points_at_a_readme_section_that_exists():
    intro = (ROOT / "book" / "intro.md").read_text()
    pointers = re.findall(r'"([^"]+)" of the\s+repository\'s\s+`README.md`', intro)
    assert pointers, "book/intro.md no longer names the README section it points to"
    for title in pointers:
        assert title in sections(README), f"README.md has no section {title!r}"
