"""Every command the documentation shows is one the code accepts.

Each ``specmetrics ...``, ``make TARGET``, ``python -m MODULE ...`` and ``docker compose ...`` in
README.md, BENCHMARKS.md and docs/*.md (fenced code and inline code) is checked against the real
thing: the command line of specmetrics/cli.py parses it, the Makefile has the target (``make -n``),
the module exists and, for a benchmark, its own argument parser accepts the options; a compose
command names only profiles and services of docker-compose.yml, and options Compose has (there is
no Docker engine here to run it). So a renamed or removed option, subcommand
or target fails here. Synopses are parsed the way a reader takes them: ``[optional]`` parts are
included, of ``a|b`` alternatives the first is taken, ``...`` is dropped unless it stands for an
option's value, and placeholders in capitals (``DATA``, ``N``, ``$DATA``) stand for any value.
A mention in prose may leave out what the command requires (``specmetrics verify`` checks ...), so
required options are not asked for.
Each test first shows that its check catches what it is for.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NoReturn
from unittest import mock

from specmetrics.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`([^`]+)`")
SPECMETRICS = re.compile(r"(?:^|(?<=[\s/]))specmetrics (.+)")
MAKE = re.compile(r"(?:^|(?<=\s))make (.+)")
PYTHON_MODULE = re.compile(r"(?:^|(?<=[\s/]))python[\d.]* -m ([\w.]+)(.*)")
COMPOSE = re.compile(r"(?:^|(?<=\s))docker compose (.+)")
#: Per Compose subcommand used in the docs: its options (those taking a value end in ``=``) and
#: whether its other words are services.
COMPOSE_COMMANDS: dict[str, tuple[frozenset[str], bool]] = {
    "up": (frozenset({"-d", "--detach", "--build", "--scale="}), True),
    "build": (frozenset(), True), "logs": (frozenset({"-f", "--follow"}), True), "ps": (frozenset(), True),
    "stop": (frozenset(), True), "kill": (frozenset(), True), "start": (frozenset(), True),
    "restart": (frozenset(), True), "rm": (frozenset({"-s", "--stop", "-f", "--force"}), True),
    "down": (frozenset({"-v", "--volumes"}), False),
    "config": (frozenset({"-q", "--quiet"}), False),
    "run": (frozenset({"--rm", "--no-deps"}), True),  # the service, then its command
}
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_]*|\$\{?\w+\}?|\.\.\.)$")
SHELL_OPERATORS = frozenset({"|", "||", "&&", ";", "&", "<", ">", ">>", "2>&1"})
ALTERNATIVE = "\x1f"  # stands for a table's escaped ``\|`` between alternatives while the line is split


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]


def snippets(text: str) -> Iterator[str]:
    """Each line of fenced code (continuation lines joined) and each inline code span, one line."""
    for fence in FENCE.findall(text):
        yield from fence.replace("\\\n", " ").splitlines()[1:-1]
    for span in INLINE_CODE.findall(FENCE.sub("", text)):
        yield " ".join(span.split())


def words(command: str) -> list[str]:
    """The words of a documented command line up to a shell operator or comment, read as a synopsis:
    brackets dropped, ``...`` dropped (kept as an option's elided value), the first of ``a|b``
    alternatives."""
    unbracketed = command.replace("\\|", ALTERNATIVE).replace("[", " ").replace("]", " ")
    try:
        tokens = shlex.split(unbracketed, comments=True)
    except ValueError:  # an unclosed quote: a span that shows only the start of a command
        tokens = unbracketed.split()
    found: list[str] = []
    for token in tokens:
        if token in SHELL_OPERATORS or token.startswith((">", "2>")):
            break
        if token != "..." or (found and found[-1].startswith("-")):
            found.append(token.split(ALTERNATIVE)[0])
    return found


def documented(pattern: re.Pattern[str], text: str) -> Iterator[tuple[str, list[str]]]:
    """(the matched command, its words) of every match of ``pattern`` in the code of ``text``."""
    for snippet in snippets(text):
        for match in pattern.finditer(snippet):
            yield match.group(0), words(match.group(0))


def any_value(action: argparse.Action, convert: Callable[[str], Any] | None) -> Callable[[str], Any]:
    """The action's type, except that a placeholder stands for a value it accepts."""

    def converted(value: str) -> Any:
        if PLACEHOLDER.match(value):
            return next(iter(action.choices)) if action.choices else value
        return convert(value) if convert else value

    return converted


def relax(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` for a dry parse of synopses and mentions: nothing required but the subcommands,
    placeholders accepted as values; options (spelt out in full), choices and real values are
    checked as they are."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                relax(subparser)
            continue
        action.required = False
        if not action.option_strings and action.nargs is None:
            action.nargs = "?"
        if action.nargs != 0:
            action.type = any_value(action, action.type)  # type: ignore[arg-type]
    return parser


@cache
def dry_parser() -> argparse.ArgumentParser:
    return relax(build_parser())


def parse_error(parse: Callable[[list[str]], object], argv: list[str]) -> str | None:
    """What the parser says about ``argv`` when it refuses it, else None."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            parse(argv)
    except SystemExit as exit_:
        if exit_.code:
            return said.getvalue().strip().splitlines()[-1]
    return None


def specmetrics_problems(name: str, text: str) -> list[str]:
    return [f"{name}: `{command}`: {error}" for command, argv in documented(SPECMETRICS, text)
            if (error := parse_error(dry_parser().parse_args, argv[1:]))]


@cache
def make_target_error(target: str) -> str | None:
    """Why ``make TARGET`` would not run a rule of the Makefile (a folder named so is no target)."""
    if not re.search(rf"^{re.escape(target)}\s*:", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE):
        return f"the Makefile has no target {target}"
    dry_run = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=False)
    if dry_run.returncode == 0:
        return None
    return dry_run.stderr.strip() or f"exit code {dry_run.returncode}"


def make_problems(name: str, text: str) -> list[str]:
    problems = []
    for command, argv in documented(MAKE, text):
        targets = [word for word in argv[1:] if not word.startswith("-") and "=" not in word]
        problems += [f"{name}: `{command}`: {error}" for target in targets[:1] if (error := make_target_error(target))]
    return problems


class Parsed(Exception):
    """Raised instead of running a benchmark once its command line is parsed."""


def benchmark_argv_error(module: str, argv: list[str]) -> str | None:
    """What the benchmark's own argument parser says about ``argv`` (its ``main`` is stopped right
    after parsing, so nothing is measured)."""
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser: argparse.ArgumentParser, args: Sequence[str] | None = None,
                        namespace: Any = None) -> NoReturn:
        parser.allow_abbrev = False
        original(parser, args, namespace)
        raise Parsed

    main = importlib.import_module(module).main
    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_then_stop):
        try:
            return parse_error(main, argv) or f"{module}.main did not parse its arguments"
        except Parsed:
            return None


def python_module_problems(name: str, text: str) -> list[str]:
    problems = []
    for command, argv in documented(PYTHON_MODULE, text):
        module, options = argv[2], argv[3:]
        if importlib.util.find_spec(module) is None:
            problems.append(f"{name}: `{command}`: no module {module}")
        elif module.startswith("benchmarks.") and options and (error := benchmark_argv_error(module, options)):
            problems.append(f"{name}: `{command}`: {error}")
    return problems


@cache
def compose_file(*paths: str) -> tuple[frozenset[str], frozenset[str]]:
    """The services and profiles of the compose files (docker-compose.yml where none is named)."""
    import yaml

    services: dict[str, dict[str, Any]] = {}
    for path in paths or ("docker-compose.yml",):
        services |= yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))["services"]
    profiles = {profile for service in services.values() for profile in service.get("profiles", [])}
    return frozenset(services), frozenset(profiles)


def compose_error(argv: list[str]) -> str | None:
    """Why ``docker compose`` would refuse ``argv`` (the words after ``docker compose``) here."""
    files = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word in ("-f", "--file")]
    if missing := [path for path in files if not (ROOT / path).is_file()]:
        return f"no compose file {missing[0]!r} in the repository"
    services, profiles = compose_file(*files)
    words = iter(argv)
    for word in words:
        if word in ("-f", "--file"):
            next(words, "")
            continue
        if word == "--profile":
            if (profile := next(words, "")) not in profiles and not PLACEHOLDER.match(profile):
                return f"no profile {profile!r} in the compose files"
            continue
        if word not in COMPOSE_COMMANDS:
            return f"no compose command {word!r} in the docs' check (or a misspelt one)"
        options, takes_services = COMPOSE_COMMANDS[word]
        for rest in words:
            if rest.startswith("-"):
                name, given, value = rest.partition("=")
                if rest not in options and f"{name}=" not in options:
                    return f"compose {word} has no option {rest}"
                if f"{name}=" in options and not given:
                    value = next(words, "")
                if name == "--scale" and value.split("=")[0] not in services:
                    return f"no service {value.split('=')[0]!r} to scale"
            elif takes_services and rest not in services and not PLACEHOLDER.match(rest):
                return f"no service {rest!r} in the compose files"
            elif word == "run":
                return None  # the rest is the service's command (a specmetrics one is checked as such)
        return None
    return "no compose command"


def compose_problems(name: str, text: str) -> list[str]:
    return [f"{name}: `{command}`: {error}" for command, argv in documented(COMPOSE, text)
            if (error := compose_error(argv[2:]))]


def problems(check: Callable[[str, str], list[str]]) -> list[str]:
    found = []
    for path in documents():
        found += check(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
    return found


def count(pattern: re.Pattern[str]) -> int:
    return sum(1 for path in documents() for _ in documented(pattern, path.read_text(encoding="utf-8")))


def test_every_documented_specmetrics_command_parses() -> None:
    wrong = ["`specmetrics ingest --source file:///LOG --out DATA --flush-row 10`",  # a misspelt option
             "| `specmetrics schema [--format yaml\\|json]` | |",  # a choice it lacks
             "```\nspecmetrics serve --dir DIR --port eighty\n```",  # a value of the wrong type
             "`specmetrics stats --data DATA`"]  # no such command
    for text in wrong:
        assert specmetrics_problems("doc.md", text), text
    assert not specmetrics_problems("doc.md", "| `specmetrics loadgen --sink file:///LOG\\|kafka://H:1/T "
                                              "[--rows N --scheduling sync\\|async] [--truth FILE\\|-]` | |\n"
                                              "`specmetrics verify` fails when ...\n```\n"
                                              'sudo .venv/bin/specmetrics sql --data "$DATA" "SELECT 1"  # x\n```')
    assert count(SPECMETRICS) > 40
    found = problems(specmetrics_problems)
    assert not found, "\n".join(found)


def test_every_documented_make_target_exists() -> None:
    assert make_problems("doc.md", "run `make tests` first")  # a folder, not a target
    assert make_problems("doc.md", "```\nmake benchmark\n```")
    assert not make_problems("doc.md", "```\nmake demo   # the demo\n```")
    assert count(MAKE) >= 4
    found = problems(make_problems)
    assert not found, "\n".join(found)


def test_every_documented_python_module_exists_and_its_benchmark_options_parse() -> None:
    assert python_module_problems("doc.md", "`python -m benchmarks.bench_wire --step 2000`")
    assert python_module_problems("doc.md", "`python -m benchmarks.bench_wires`")
    assert not python_module_problems("doc.md", "`python -m benchmarks.bench_wire --steps 2000 > out.txt`")
    assert count(PYTHON_MODULE) > 5
    found = problems(python_module_problems)
    assert not found, "\n".join(found)


def test_every_documented_compose_command_names_the_compose_files_profiles_and_services() -> None:
    assert compose_problems("doc.md", "`docker compose --profile monitor up -d`")  # no such profile
    assert compose_problems("doc.md", "```\ndocker compose up -d vllm-gpu\n```")  # no such service
    assert compose_problems("doc.md", "`docker compose up -d --scale ingester=3`")
    assert compose_problems("doc.md", "`docker compose upp`")
    assert not compose_problems("doc.md", "```\ndocker compose --profile demo up -d   # no GPU\n"
                                          "docker compose run --rm --no-deps reports specmetrics sql --data D\n```")
    assert count(COMPOSE) > 10
    found = problems(compose_problems)
    assert not found, "\n".join(found)
