"""The packages import along the data flow, so there is no import cycle between them:

    schemas -> transport, storage -> emitter, ingest -> queries -> reports, monitoring -> specmetrics (the CLI)

A package may import itself and the packages of earlier levels; the packages of one level import
not each other (transport and storage, emitter and ingest, reports and monitoring). ``devtools``
(the test Kafka broker) imports no package of the repository, ``benchmarks`` and ``scripts``
import any but the tests, and the tests import anything. Every import statement counts, in
functions and under ``TYPE_CHECKING`` too. No test module imports a conftest module or another
test module: conftest modules hold fixtures, and what tests share to import lives in
``tests/support/``. Each test first shows that its check
catches what it is for.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.layout import FLOW, ROOT

PRODUCT = {package: level for level, packages in enumerate(FLOW) for package in packages}
DEVTOOLS = "devtools"
USERS = ("benchmarks", "scripts")  # may import the product and devtools, never the tests
TESTS = "tests"
NAMESPACE = "specmetrics"  # every package of the product is installed under it
KNOWN = {*PRODUCT, DEVTOOLS, *USERS, TESTS}


def allowed(importer: str, imported: str) -> bool:
    """Whether a module of top-level package ``importer`` may import one of ``imported``."""
    if importer == imported or importer == TESTS:
        return True
    if importer in PRODUCT:
        return imported in PRODUCT and PRODUCT[imported] < PRODUCT[importer]
    if importer in USERS:
        return imported in PRODUCT or imported == DEVTOOLS
    return False  # devtools


def package_of(module: str) -> str:
    """The package of the flow that the dotted name ``module`` is in: ``specmetrics.<folder>...`` is
    the folder's (the namespace the distribution installs), any other name its first part's."""
    parts = module.split(".")
    return parts[1] if parts[0] == NAMESPACE and len(parts) > 1 and parts[1] in PRODUCT else parts[0]


def imported_packages(path: Path, top: str) -> list[tuple[int, str, str]]:
    """``(line, package, dotted name)`` of every import in the module at ``path`` (a relative import
    stays in ``top``, under its own name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, package_of(alias.name), alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == NAMESPACE and not node.level:
            found += [(node.lineno, package_of(f"{NAMESPACE}.{alias.name}"), NAMESPACE) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            found.append((node.lineno, top, top) if node.level else (node.lineno, package_of(module), module))
    return found


def python_files(root: Path) -> list[tuple[str, Path]]:
    """``(top-level folder, path)`` of every module below a top-level folder of ``root``. ``**`` does not
    follow links: specmetrics/<folder> links to <folder>, whose modules are the folder's."""
    return sorted((path.relative_to(root).parts[0], path) for path in root.glob("*/**/*.py")
                  if not any(part.startswith(".") for part in path.relative_to(root).parts))


def violations(root: Path) -> list[str]:
    """Every import in the tree at ``root`` that runs against the flow, or names a package of the
    product outside the ``specmetrics`` namespace, as ``path:line``."""
    found = []
    for top, path in python_files(root):
        for line, imported, module in imported_packages(path, top):
            where = f"{path.relative_to(root)}:{line}"
            if imported in PRODUCT and imported != NAMESPACE and module.split(".")[0] == imported and \
                    module != top:
                found.append(f"{where}: {top} imports {module} outside the {NAMESPACE} namespace")
            elif imported in KNOWN and not allowed(top, imported):
                found.append(f"{where}: {top} imports {imported}")
    return found


def unplaced_packages(root: Path) -> set[str]:
    """Top-level folders with Python modules that the flow does not place."""
    return {top for top, _ in python_files(root)} - KNOWN


def imported_modules(path: Path, package: tuple[str, ...]) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every module that an import in the module at ``path``, of
    ``package``, may bring in: ``from m import a`` counts as ``m`` and ``m.a`` (``a`` may be a
    module), a relative import resolved against ``package``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[:len(package) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found += [(node.lineno, base), *((node.lineno, f"{base}.{alias.name}") for alias in node.names)]
    return found


def imports_in_the_test_tree(root: Path, offends: Callable[[list[str]], bool]) -> list[str]:
    """Every import by a module under ``root/tests`` of a test-tree module whose dotted name's
    parts ``offends``, as ``path:line: imports name``."""
    found = []
    for path in sorted((root / TESTS).glob("**/*.py")):
        relative = path.relative_to(root)
        for line, module in imported_modules(path, relative.parent.parts):
            parts = module.split(".")
            if parts[0] == TESTS and offends(parts):
                found.append(f"{relative}:{line}: imports {module}")
    return found


def conftest_imports(root: Path) -> list[str]:
    """Every import of a conftest module (``tests.conftest``, ``tests.<package>.conftest``)."""
    return imports_in_the_test_tree(root, lambda parts: parts[-1] == "conftest")


def imports_of_test_modules(root: Path) -> list[str]:
    """Every import of a test module or another module of the test tree outside ``tests/support``
    (what tests share lives there); a name imported from a module is no module of its own."""
    return imports_in_the_test_tree(root, lambda parts: len(parts) > 1 and parts[1] != "support"
                             and (root / Path(*parts)).with_suffix(".py").exists())


def write_module(root: Path, name: str, source: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("ingest/sources/kafka.py", "from specmetrics.emitter.kafka import KafkaAddress\n", "ingest imports emitter"),
    ("emitter/publisher.py", "def f():\n    import specmetrics.ingest.durable\n", "emitter imports ingest"),
    ("storage/durable.py", "from specmetrics.transport.log import LocalLogWriter\n", "storage imports transport"),
    ("transport/log/writer.py", "from specmetrics.storage.durable import write_atomically\n",
     "transport imports storage"),
    ("schemas/wire.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import specmetrics.queries\n",
     "schemas imports queries"),
    ("queries/catalog.py", "from specmetrics.reports import collect\n", "queries imports reports"),
    ("reports/data.py", "from specmetrics.windows import WINDOWS\n", "reports imports specmetrics"),
    ("reports/data.py", "from queries.catalog import connect\n",
     "reports imports queries.catalog outside the specmetrics namespace"),
    ("tests/test_x.py", "import storage.layout\n", "tests imports storage.layout outside the specmetrics namespace"),
    ("benchmarks/bench_kafka.py", "from tests.kafka_broker import TansuBroker\n", "benchmarks imports tests"),
    ("devtools/kafka_broker.py", "import tests.conftest\n", "devtools imports tests"),
])
def test_the_check_catches_an_import_against_the_flow(tmp_path: Path, module: str, source: str,
                                                      expected: str) -> None:
    write_module(tmp_path, module, source)
    assert [v.split(": ", 1)[1] for v in violations(tmp_path)] == [expected]


def test_the_check_allows_imports_along_the_flow(tmp_path: Path) -> None:
    write_module(tmp_path, "reports/data.py", "import specmetrics.queries\nfrom specmetrics.storage.layout import "
                 "DATA_GLOB\nfrom specmetrics import schemas\n")
    write_module(tmp_path, "ingest/batch.py", "from . import output\nfrom specmetrics.transport.log import "
                 "LocalLogReader\n")
    write_module(tmp_path, "benchmarks/bench_kafka.py", "from devtools.kafka_broker import TansuBroker\n")
    write_module(tmp_path, "tests/test_x.py", "import benchmarks.args\nimport specmetrics.cli\n")
    assert violations(tmp_path) == []
    write_module(tmp_path, "plugins/x.py", "")
    assert unplaced_packages(tmp_path) == {"plugins"}


def test_every_import_runs_along_the_flow() -> None:
    assert violations(ROOT) == []


@pytest.mark.parametrize(("source", "expected"), [
    ("from tests.conftest import step_event\n", "tests.conftest"),
    ("def f():\n    import tests.ingest.conftest\n", "tests.ingest.conftest"),
    ("from tests.queries import conftest\n", "tests.queries.conftest"),
    ("from .conftest import Run\n", "tests.emitter.vllm.conftest"),
    ("from ...conftest import T0\n", "tests.conftest"),
], ids=["absolute", "in a function", "as a name", "relative", "relative, three levels up"])
def test_the_check_catches_a_test_importing_a_conftest_module(tmp_path: Path, source: str, expected: str) -> None:
    write_module(tmp_path, "tests/emitter/vllm/test_x.py", source)
    write_module(tmp_path, "tests/emitter/vllm/conftest.py", "from tests.support.ingest import ingest_once\n")
    assert [v.split(": ", 1)[1] for v in conftest_imports(tmp_path)] == [f"imports {expected}"]


def test_no_test_imports_a_conftest_module() -> None:
    assert conftest_imports(ROOT) == []


def test_tests_share_code_only_through_tests_support(tmp_path: Path) -> None:
    write_module(tmp_path, "tests/schemas/test_wire.py", "K = 5\n")
    write_module(tmp_path, "tests/emitter/vllm/schedulers.py", "")
    write_module(tmp_path, "tests/support/events.py", "")
    write_module(tmp_path, "tests/schemas/test_validation.py",
                 "from tests.schemas.test_wire import K\nfrom tests.support.events import step_event\n"
                 "from ..emitter.vllm import schedulers\n")
    assert [v.split(": ", 1)[1] for v in imports_of_test_modules(tmp_path)] == [
        "imports tests.schemas.test_wire", "imports tests.emitter.vllm.schedulers"]
    assert imports_of_test_modules(ROOT) == []


def test_every_package_has_a_place_in_the_flow() -> None:
    assert unplaced_packages(ROOT) == set()
    assert {top for top, _ in python_files(ROOT)} >= {*PRODUCT, DEVTOOLS, "benchmarks", TESTS}
