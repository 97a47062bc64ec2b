"""Help that reads at 80 columns: every option of every command named whole."""

from __future__ import annotations

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
