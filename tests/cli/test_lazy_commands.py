"""`main` registers only the group of the command a line names, and that changes nothing the
user sees: the map of commands to groups is the groups' own, and a command's help and errors
are those of the whole application."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from neardup.cli import main as cli_main
from neardup.cli.main import COMMAND_GROUPS, GROUPS, build_app, groups_for


def _commands(app: typer.Typer) -> set[str]:
    return set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("group", GROUPS)
def test_command_map_is_what_each_group_registers(group: str) -> None:
    expected = {name for name, g in COMMAND_GROUPS.items() if g == group}
    assert _commands(build_app([group])) == expected


def test_whole_app_has_every_mapped_command() -> None:
    assert _commands(cli_main.app) == set(COMMAND_GROUPS)


@pytest.mark.parametrize(
    "args, groups",
    [
        (["scan", "crawl.warc.gz"], ("scan",)),
        (["find-moved", "--help"], ("crawls",)),
        (["serve"], ("service",)),
        ([], GROUPS),
        (["--help"], GROUPS),
        (["--version"], ()),  # the root's own option: no command's group
        (["--version", "scan"], GROUPS),
        (["scna"], GROUPS),  # a misspelt command: the whole app suggests the right one
    ],
)
def test_groups_for_a_command_line(args: list[str], groups: tuple[str, ...]) -> None:
    assert groups_for(args) == groups


def test_completion_gets_every_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_NEARDUP_COMPLETE", "complete_bash")
    assert groups_for(["scan"]) == GROUPS


@pytest.mark.parametrize(
    "args",
    [
        ["scan", "--help"],
        ["dedup", "--help"],
        ["query", "--help"],
        ["scan", "--no-such-option", "x"],
        ["scan"],
    ],
)
def test_a_command_alone_answers_as_the_whole_app(args: list[str]) -> None:
    runner = CliRunner()
    alone = runner.invoke(build_app(groups_for(args)), args, prog_name="neardup")
    whole = runner.invoke(cli_main.app, args, prog_name="neardup")
    assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output)


def _loaded_after(args: list[str], names: set[str]) -> subprocess.CompletedProcess[str]:
    """`neardup ARGS` run by `main` in a fresh Python, which then prints (on stderr, after
    `LOADED`) which of the modules `names` it had imported."""
    code = (
        "import sys\n"
        f"sys.argv = ['neardup', *{args!r}]\n"
        "from neardup.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"loaded = sorted(m for m in {sorted(names)!r} if m in sys.modules)\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_scan_command_line_imports_no_other_group() -> None:
    others = {f"neardup.cli.{group}" for group in ("crawls", "service", "report", "linkgraph")}
    done = _loaded_after(["scan", "--help"], others)
    assert "LOADED []" in done.stderr, done.stderr[-2000:]
    assert "Usage: neardup scan" in done.stdout


def test_a_scan_loads_no_validation_library(tmp_path) -> None:
    """A scan's options are parsed without pydantic (typer 0.29 loads it and builds a
    validator for each option: 0.2 CPU-s of a one-record scan) and without a second Click
    beside the copy typer parses with."""
    one = tmp_path / "one.jsonl"
    one.write_text('{"url": "https://a.example/", "text": "a page of a few words"}\n')
    done = _loaded_after(
        ["scan", str(one), "-o", str(tmp_path / "run"), "-q"], {"pydantic", "click"}
    )
    assert "LOADED []" in done.stderr, done.stderr[-2000:]
    assert (tmp_path / "run" / "pages.parquet").exists(), done.stderr[-2000:]


def test_interrupts_are_recognised_without_importing_duckdb() -> None:
    import duckdb

    assert cli_main._is_interrupt(KeyboardInterrupt())
    assert cli_main._is_interrupt(cli_main._Interrupted())
    assert cli_main._is_interrupt(duckdb.InterruptException("INTERRUPT Error"))
    assert cli_main._is_interrupt(RuntimeError("Query interrupted"))
    assert not cli_main._is_interrupt(RuntimeError("disk full"))
    assert not cli_main._is_interrupt(ValueError("interrupt"))


def test_service_help_loads_no_database() -> None:
    """The service group imports its library when a command runs, so its help is quick."""
    done = _loaded_after(["serve", "--help"], {"duckdb"})
    assert "Usage: neardup serve" in done.stdout
    assert "LOADED []" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize(
    "args, spark",
    [
        ([], False),  # `neardup --version`: nothing after the first word
        (["--engine"], False),
        (["run", "--engine", "spark"], True),
        (["--engine=spark", "run"], True),
        (["run", "--engine", "embedded"], False),
        (["spark"], False),
    ],
)
def test_which_command_lines_ask_for_spark(args: list[str], spark: bool) -> None:
    """Every line but these goes without the modules only probed for (`neardup.startup`)."""
    assert cli_main._on_spark(args) is spark
