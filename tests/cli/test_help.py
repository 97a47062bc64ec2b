"""Help that reads at 80 columns: every option of every command named whole."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from neardup.cli.main import app

COMMAND = typer.main.get_command(app)
NAMES = ["", *COMMAND.commands]  # type: ignore[attr-defined]


def _options(name: str) -> list[str]:
    """Every spelling of every option of the command (`--wrap` and `--no-wrap`, `-o`)."""
    command = COMMAND.commands[name] if name else COMMAND  # type: ignore[attr-defined]
    return [
        spelling
        for param in command.params
        if param.param_type_name == "option" and not param.hidden
        for spelling in (*param.opts, *param.secondary_opts)
    ]


@pytest.mark.parametrize("name", NAMES, ids=[n or "neardup" for n in NAMES])
def test_help_at_80_columns_names_every_option_whole(name: str) -> None:
    args = [name, "--help"] if name else ["--help"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    words = {word.strip(",") for line in lines for word in line.split()}
    missing = [option for option in _options(name) if option not in words]
    assert not missing, f"neardup {name} --help cuts {missing}:\n{result.output}"
    assert "…" not in result.output


def test_every_command_is_checked() -> None:
    assert {"scan", "dedup", "serve", "ui", "add"} <= set(NAMES)
    assert "--max-shingle-df" in _options("scan")
    assert "--no-include-error-pages" in _options("scan")


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80"}, prog_name="neardup")
    assert result.exit_code == 0, result.output
    return result.output


def _sections(text: str) -> dict[str, list[str]]:
    """The help's sections ("Name:" at the margin) with their indented lines."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = sections.setdefault(line[:-1], [])
        elif line.startswith("  "):
            current.append(line)
    return sections


def test_every_command_is_under_one_heading() -> None:
    from neardup.cli.main import COMMAND_GROUPS, HELP_PANELS

    listed = [name for names in HELP_PANELS.values() for name in names]
    assert sorted(listed) == sorted(COMMAND_GROUPS)  # each once, none forgotten


def test_command_list_is_grouped_with_whole_descriptions() -> None:
    """`neardup --help` at 80 columns: the commands under their headings, in order, and
    each one's first sentence whole (wrapped, never cut with "...")."""
    from neardup.cli.main import HELP_PANELS

    text = _help()
    assert "..." not in text.replace("[ARGS]...", "")
    sections = _sections(text)
    assert [s for s in sections if s in HELP_PANELS] == list(HELP_PANELS)
    for panel, names in HELP_PANELS.items():
        lines = sections[panel]
        firsts = [line.split()[0] for line in lines if not line.startswith("   ")]
        assert firsts == list(names), (panel, lines)
        body = " ".join(" ".join(lines).split())
        for name in names:
            sentence = COMMAND.commands[name].help.split("\n\n")[0]  # type: ignore[attr-defined]
            first = " ".join(sentence.split()).split(". ")[0].rstrip(".")
            assert f"{name} {first}" in body, f"{name}: {first!r} not whole in {body!r}"


@pytest.mark.parametrize("name", NAMES[1:])
def test_usage_names_arguments_as_click_does(name: str) -> None:
    """`Usage: neardup scan [OPTIONS] INPUTS...`, never Typer's `{inputs}...`."""
    usage = _help(name).splitlines()[0]
    assert "{" not in usage and "}" not in usage, usage
    arguments = [p for p in COMMAND.commands[name].params if p.param_type_name == "argument"]  # type: ignore[attr-defined]
    for param in arguments:
        assert param.name.upper() in usage, usage


def test_scan_usage_and_arguments() -> None:
    text = _help("scan")
    assert text.splitlines()[0] == "Usage: neardup scan [OPTIONS] INPUTS..."
    assert "  INPUTS...  WARC/ARC files" in text
    assert "Usage: neardup find-moved [OPTIONS] [URL]" in _help("find-moved")


def test_scan_help_says_which_settings_for_what() -> None:
    """The guide names a setting for each use, and the clustering rule's default with why;
    its figures are the documentation benchmark's (docs/benchmarks.md)."""
    text = " ".join(_help("scan").split())
    assert "Which settings for what" in text
    for use in (
        "near-duplicate web pages, navigation and boilerplate included: the defaults",
        "removing copies from a dataset",
        "virtually identical pages only: --method supershingles",
        "excerpts, pages contained in others: --method broder-min --containment 0.8",
        "mirrored hosts: the defaults, then `neardup mirrors OUT`",
    ):
        assert use in text
    assert "--cluster-rule core, the default" in text
    assert "0.987" in text and "5 percent" in text
    benchmarks = (Path(__file__).parents[2] / "docs" / "benchmarks.md").read_text("utf-8")
    assert "0.9870" in benchmarks and "5.063 %" in benchmarks and "0.9748" in benchmarks
    rule = text.split("--cluster-rule <str>")[1].split("--max-shingle-df")[0]
    assert "core (the default)" in rule and "[default: core]" in rule
    assert "center" in rule and "transitive" in rule
