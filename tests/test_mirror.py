"""Every product module with logic has its tests.

Its test module mirrors it, ``tests/<its folder>/test_<its name>.py``, or, where the module's
behaviour is tested by concern (a crash, a fault, a command run end to end), :data:`TESTED_BY`
names the test modules that exercise it; each of those imports the module, or runs the command
the module implements, or runs ``specmetrics`` commands that reach it (a fixture or a shared runner of many tests may
stand for them). A module has logic when its functions hold at least :data:`LOGIC_LINES`
lines of code. Each test first shows that its check catches what it is for.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.layout import FLOW, ROOT

LOGIC_LINES = 15
PRODUCT_PACKAGES = tuple(package for level in FLOW for package in level)
TESTED_BY: dict[str, tuple[str, ...]] = {
    "transport/kafka/admin.py": ("tests/specmetrics/commands/test_create_topics.py",),
    "transport/log/directory.py": ("tests/ingest/test_fault_injection_log.py",),
    "transport/log/segment.py": ("tests/transport/log/test_reader.py", "tests/transport/log/test_writer.py"),
    "storage/durable.py": ("tests/storage/test_files.py",),
    "emitter/loadgen/ground_truth.py": ("tests/emitter/loadgen/test_simulator.py",),
    "ingest/dead_letter_topic.py": ("tests/ingest/sources/test_kafka.py",),
    "ingest/sources/local_log.py": ("tests/ingest/test_ingester.py", "tests/ingest/test_fault_injection_log.py"),
    "reports/charts.py": ("tests/reports/test_report_command.py", "tests/reports/test_report_browser.py"),
    "reports/render.py": ("tests/reports/test_report_command.py", "tests/reports/test_report_browser.py"),
    "reports/writer.py": ("tests/reports/test_report_command.py",),
    "specmetrics/commands/ingest.py": ("tests/ingest/test_crash_recovery.py", "tests/monitoring/test_endpoint.py"),
    "specmetrics/commands/db.py": ("tests/queries/test_export.py", "tests/queries/test_spark.py"),
    "specmetrics/commands/table.py": ("tests/ingest/test_convert.py", "tests/storage/test_compaction.py"),
    "specmetrics/commands/loadgen.py": ("tests/specmetrics/test_cli.py", "tests/deploy/test_demo_stack.py"),
    "specmetrics/commands/report.py": ("tests/reports/test_report_command.py",),
    "specmetrics/commands/rollup.py": ("tests/queries/test_verify.py",),
    "specmetrics/commands/sql.py": ("tests/specmetrics/test_cli.py", "tests/specmetrics/test_shell.py"),
    "specmetrics/commands/verify.py": ("tests/queries/test_verify.py",),
    # the fixture that builds the models of every vLLM test, and the runner of the scenarios on vLLM
    "specmetrics/tiny_models.py": ("tests/emitter/vllm/conftest.py",),
    "specmetrics/vllm_scenarios.py": ("tests/support/vllm.py",),
}

#: Of those, the modules their tests reach by running ``specmetrics`` commands, not by importing them.
THROUGH_THE_CLI = frozenset({
    "ingest/dead_letter_topic.py", "ingest/sources/local_log.py", "reports/charts.py", "reports/render.py",
    "reports/writer.py",
})


def logic_lines(path: Path) -> int:
    """Lines of code in the bodies of the module's functions (docstrings left out)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            for statement in body:
                lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return len(lines)


def mirror(module: Path) -> Path:
    """``tests/<folder>/test_<name>.py`` of a module path relative to the root."""
    return Path("tests", *module.parent.parts, f"test_{module.name}")


def modules_with_logic(root: Path) -> list[Path]:
    return [path.relative_to(root) for package in PRODUCT_PACKAGES for path in sorted((root / package).rglob("*.py"))
            if path.name != "__init__.py" and logic_lines(path) >= LOGIC_LINES]


def untested(root: Path, tested_by: dict[str, tuple[str, ...]]) -> list[str]:
    """Modules with logic that have neither a mirrored test module nor an entry in ``tested_by``."""
    return [str(module) for module in modules_with_logic(root)
            if not (root / mirror(module)).exists() and str(module) not in tested_by]


def imported(path: Path) -> set[str]:
    """Dotted names of the modules the module at ``path`` imports from (absolute imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    names |= {f"{node.module}.{alias.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
              for alias in node.names}
    return names | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


def reexported_by(package: str, module: str) -> bool:
    """Whether ``package``'s ``__init__`` imports from ``module`` (names the package re-exports)."""
    init = ROOT / package.replace(".", "/") / "__init__.py"
    if not init.exists():
        return False
    tree = ast.parse(init.read_text(encoding="utf-8"))
    relative = {f"{package}.{node.module}" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}
    return module in imported(init) | relative


def exercises(test: str, module: str) -> bool:
    """Whether the test module imports ``module`` (a path; through a package that re-exports it
    too), or runs the command it implements, or (a module of :data:`THROUGH_THE_CLI`) runs the
    command line."""
    dotted = module.removesuffix(".py").replace("/", ".")
    if not dotted.startswith("specmetrics."):  # a top folder is imported as a package of the namespace
        dotted = f"specmetrics.{dotted}"
    names = imported(ROOT / test)
    if any(name == dotted or name.startswith(f"{dotted}.") for name in names):
        return True
    if any(reexported_by(name, dotted) for name in names if dotted.startswith(f"{name}.")):
        return True
    text = (ROOT / test).read_text(encoding="utf-8")
    if f'"{dotted}"' in text:  # it runs the module (python -m)
        return True
    if dotted.startswith("specmetrics.commands."):
        command = dotted.rpartition(".")[2].replace("_", "-")
        return f'"{command}"' in text or f"'{command}'" in text
    return module in THROUGH_THE_CLI and "specmetrics.cli" in text


def test_the_check_finds_a_module_with_logic_and_no_tests(tmp_path: Path) -> None:
    logic = "def f(x):\n" + "".join(f"    x += {i}\n" for i in range(LOGIC_LINES)) + "    return x\n"
    (tmp_path / "ingest").mkdir()
    (tmp_path / "ingest/batch.py").write_text(logic)
    (tmp_path / "ingest/small.py").write_text('def g():\n    """Doc."""\n    return 1\n')
    assert untested(tmp_path, {}) == ["ingest/batch.py"]
    (tmp_path / "tests/ingest").mkdir(parents=True)
    (tmp_path / "tests/ingest/test_batch.py").write_text("")
    assert untested(tmp_path, {}) == []


def test_every_module_with_logic_has_its_tests() -> None:
    assert len(modules_with_logic(ROOT)) > 50
    assert untested(ROOT, TESTED_BY) == []


def test_the_tests_named_for_a_module_exercise_it() -> None:
    assert not exercises("tests/ingest/test_batch.py", "ingest/output.py")
    assert exercises("tests/reports/test_report_command.py", "specmetrics/commands/report.py")
    assert exercises("tests/reports/test_report_command.py", "reports/render.py")
    assert not exercises("tests/reports/test_report_command.py", "transport/kafka/admin.py")  # runs the CLI only
    assert THROUGH_THE_CLI <= set(TESTED_BY)
    for module, tests in TESTED_BY.items():
        assert (ROOT / module).exists(), module
        assert not (ROOT / mirror(Path(module))).exists(), f"{module} has its mirrored test module: drop the entry"
        for test in tests:
            assert (ROOT / test).exists(), test
            assert exercises(test, module), f"{test} neither imports {module} nor runs its command"
