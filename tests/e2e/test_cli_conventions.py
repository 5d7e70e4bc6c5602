"""What a Python user expects of the command line: `python -m stream_dp`, `--version`, plain
help texts, the demo's own defaults in its help, one wording for an unreadable file, a typo in
a STREAM_DP_* variable stopping every command, and a missing extra named in one line."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import stream_dp
from stream_dp import cli
from stream_dp.config import ConfigError, check_environment, known_environment_variables
from stream_dp.dp.mechanism_specs import MEAN_MECHANISM_NAMES
from stream_dp.windows.reject_reasons import RejectReason

ROOT = Path(__file__).parents[2]


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _all_parsers(child)
    return found


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAM_DP_")}
    return subprocess.run(
        [sys.executable, "-m", "stream_dp", *args],
        cwd=ROOT,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_dash_m_prints_the_version() -> None:
    done = _run("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"stream-dp {stream_dp.__version__}"


def test_help_texts_have_no_rest_markup() -> None:
    parsers = _all_parsers(cli.build_parser())
    assert len(parsers) > len(cli.COMMANDS)  # the commands and the experiments
    for parser in parsers:
        text = parser.format_help()
        for markup in ("``", ":mod:", ":func:", ":class:", ":meth:"):
            assert markup not in text, f"{parser.prog}: {markup!r} in its help"


def test_mean_mechanism_help_lists_every_choice_and_argparse_refuses_others(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from stream_dp.dp.mechanisms import MEAN_MECHANISMS

    monkeypatch.setenv("COLUMNS", "1000")  # no line wrapping inside hyphenated names
    assert set(MEAN_MECHANISM_NAMES) == set(MEAN_MECHANISMS)
    release = next(p for p in _all_parsers(cli.build_parser()) if p.prog.endswith(" release"))
    text = " ".join(release.format_help().split())
    for name in MEAN_MECHANISM_NAMES:
        assert name in text
    with pytest.raises(SystemExit) as stopped:
        cli.main(["release", "x.csv", "--out", "y", "--mean-mechanism", "clipp"])
    assert stopped.value.code == 2
    assert "invalid choice: 'clipp'" in capsys.readouterr().err


def _option_help(parser: argparse.ArgumentParser, option: str) -> str:
    action = next(a for a in parser._actions if option in a.option_strings)
    return str(action.help)


def test_demo_serve_and_release_help_show_the_one_profile() -> None:
    """Issue 34: demo, serve and release show the same defaults, the settings' (the per-vehicle
    budget profile: T 10/65 of U, B 14 per 7 days, spans of 8 h), each on its own."""
    parsers = {p.prog.split()[-1]: p for p in _all_parsers(cli.build_parser())}
    expected = {
        "--target-mean-error": "(default 10/65 of U, 10 at U 65)",
        "--coarsest-resolution": "(default max(0, resolution - 5))",
        "--variance-share": "(default 0)",
        "--epsilon": "(default 1)",
        "--resolution": "(default 8)",
        "--vehicle-budget": "(default 14)",
        "--max-span-hours": "(default 8)",
        "--budget-period-seconds": "(default 604800)",
    }
    for command in ("demo", "serve", "release"):
        for option, default in expected.items():
            assert _option_help(parsers[command], option).endswith(default), (command, option)
        assert "fixed cells" in _option_help(parsers[command], "--fixed-cells")
        assert "--vehicle-budget none" in _option_help(parsers[command], "--fixed-epsilon")


@pytest.mark.parametrize("command", ["release", "produce", "plan"])
def test_one_wording_for_an_unreadable_file(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.csv"
    extra = {"release": ["--out", str(tmp_path / "o")], "produce": [], "plan": ["--epsilon", "1"]}
    status = cli.main([command, str(missing), *extra[command]])
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == f"stream-dp {command}: error: FILE: cannot read {missing}: No such file or directory"
    )


def test_unknown_stream_dp_variable_stops_every_command_naming_the_closest_setting() -> None:
    done = _run("release", "x.csv", "--out", "y", env={"STREAM_DP_EPSILONN": "0.5"})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "STREAM_DP_EPSILONN" in lines[0] and "did you mean STREAM_DP_EPSILON?" in lines[0]


def test_check_environment_accepts_settings_and_the_documented_extras() -> None:
    known = known_environment_variables()
    assert "STREAM_DP_EPSILON" in known and "STREAM_DP_KAFKA_SSL_CAFILE" in known
    check_environment({name: "x" for name in known} | {"PATH": "/bin", "stream_dp_epsilon": "1"})
    with pytest.raises(ConfigError, match="STREAM_DP_NOPE: unknown environment variable"):
        check_environment({"STREAM_DP_NOPE": "1"})
    with pytest.raises(ConfigError, match="stream_dp_upperr.*did you mean STREAM_DP_UPPER"):
        check_environment({"stream_dp_upperr": "1"})


def test_a_command_that_needs_a_missing_extra_says_which_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    status = cli.main(["experiment", "clip-user", "--quick", "--out", str(tmp_path / "o")])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "stream-dp experiment: error: matplotlib is not installed; this command needs the "
        "'experiments' extra: pip install \"stream-dp[experiments]\""
    ]
    assert not (tmp_path / "o").exists()


# --- issue 34 item 7: every command's options in one style --------------------------------

#: The metavars of the options: one word per kind of value.
METAVARS = {
    "N", "X", "FILE", "DIR", "HOST", "HOST:PORT[,...]", "NAME", "START", "TIME", "URL", "TEXT",
}  # fmt: skip
#: ``(default …)`` closing the help, parentheses inside allowed: ``(default max(0, r - 5))``.
DEFAULT_SHOWN = re.compile(r"\(default [^()]*(?:\([^()]*\)[^()]*)*\)$")


def _value_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.nargs != 0]


def _commands() -> list[argparse.ArgumentParser]:
    """Every parser that runs something (``ledger export``, not ``ledger``)."""
    return [p for p in _all_parsers(cli.build_parser()) if p.get_default("run") is not None]


def test_every_option_shows_its_default_in_one_style(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")
    for parser in _all_parsers(cli.build_parser()):
        assert "default:" not in parser.format_help(), parser.prog
        for action in _value_options(parser):
            where = (parser.prog, action.option_strings[0])
            if action.required:
                continue
            assert DEFAULT_SHOWN.search(str(action.help)), where
            if action.default is not None:
                value = action.default
                shown = f"{value:g}" if isinstance(value, float) else str(value)
                assert f"(default {shown}" in str(action.help), where


def test_one_metavar_per_option_everywhere() -> None:
    seen: dict[str, set[str]] = {}
    for parser in _all_parsers(cli.build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not action.option_strings:  # a positional: its upper-case name
                assert str(action.metavar or action.dest).split(".")[0].isupper(), parser.prog
                continue
            if action.nargs == 0:
                continue
            metavar = action.metavar or "{" + ",".join(map(str, action.choices or ())) + "}"
            assert metavar in METAVARS or metavar.startswith("{"), (parser.prog, metavar)
            for option in action.option_strings:
                seen.setdefault(option, set()).add(metavar)
    # --out: a file (release, map) or the experiments' folder
    assert {o: m for o, m in seen.items() if len(m) > 1} == {"--out": {"FILE", "DIR"}}
    assert seen["--bootstrap"] == {"HOST:PORT[,...]"} and seen["--epsilon"] == {"X"}


@pytest.mark.parametrize("parser", _commands(), ids=lambda p: p.prog)
def test_a_mistyped_option_gets_its_commands_usage_and_a_suggestion(
    parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    option = next(o for a in parser._actions for o in a.option_strings if o.startswith("--"))
    option = next(
        (o for a in parser._actions for o in a.option_strings if o not in ("-h", "--help")),
        option,
    )
    typo = option + option[-1]
    with pytest.raises(SystemExit) as stopped:
        cli.main([*parser.prog.split()[1:], f"{typo}=1"])
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith(f"usage: {parser.prog} "), lines
    assert lines[-1].startswith(f"{parser.prog}: error: ")
    assert lines[-1].endswith(f"({typo}: did you mean {option}?)"), lines[-1]


def test_release_help_points_at_the_page_with_the_rejects_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")
    release = next(p for p in _all_parsers(cli.build_parser()) if p.prog.endswith(" release"))
    text = " ".join(release.format_help().split())
    pages = set(re.findall(r"\(([\w/]+\.md), Rejected readings\)", text))
    assert pages == {"docs/configuration.md"}, text
    page = (ROOT / "docs" / "configuration.md").read_text()
    table = page.split("\n## Rejected readings\n", 1)[1].split("\n## ", 1)[0]
    assert all(f"| `{reason}` |" in table for reason in RejectReason)


def test_the_cummings_delta_error_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(
        ["release", "x.csv", "--out", "y", "--fixed-epsilon", "--mean-mechanism", "cummings"]
    )
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert "delta (--delta / STREAM_DP_DELTA)" in err and "cummings" in err, err
