"""The repository documents itself: no tracked file points at a document or folder outside it.

The design document is docs/design.md; every reference to a design document must lead there (a
path that resolves to it, and a ``#section`` that is one of its headings). Relative paths must
not climb out of the repository, Markdown links must reach a tracked file (and a heading of it),
and nothing names the development machine's workspace, which no checkout can count on. Each test
first shows that its check catches what it is for.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = "docs/design.md"
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()  # it spells out what it looks for
#: Bad samples for the checks' self-tests, assembled so that this file names no outside file itself.
BRIEF = "design" + ".md"
OUTSIDE = ".." + "/" + "shared"

DESIGN_REFERENCE = re.compile(r"(?i)[\w./-]*\bdesign\.md(?:#([\w-]+))?")
CLIMBING_PATH = re.compile(r"(?<![\w/.%-])(?:\.\./)+[\w.-]*")
WORKSPACE_PATH = re.compile(r"(?<![\w.-])/work/[\w./-]*")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
URL = re.compile(r"^[a-z][a-z+.-]*:")
HEADING = re.compile(r"^#{1,6} (.+)$")

Check = Callable[[str, str], list[str]]


@cache
def tracked_files() -> frozenset[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return frozenset(name for name in listed.decode().split("\0") if name)


def texts() -> Iterator[tuple[str, str]]:
    """(path, text) of every tracked text file but this one."""
    for name in sorted(tracked_files()):
        if name == THIS_FILE or (ROOT / name).is_symlink():  # specmetrics/<folder> links to the folder
            continue
        try:
            yield name, (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary


def problems(check: Check) -> list[str]:
    return [problem for name, text in texts() for problem in check(name, text)]


def inside_repository(path: Path) -> str | None:
    """``path`` (absolute, normalised) relative to the repository, or None when it is outside."""
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return None


def in_link(text: str, match: re.Match[str]) -> bool:
    return text[max(match.start() - 2, 0) : match.start()] == "]("


def resolve(name: str, reference: str, link: bool) -> list[Path]:
    """Where ``reference``, written in file ``name``, may point. A Markdown ``link`` target is
    relative to the Markdown file: this one, or, in another kind of file (a generator's text), the
    one it ends up in, which may be in any folder of tracked Markdown files. A path in plain text
    is relative to the file's folder or to the repository root."""
    if link and name.endswith(".md"):
        bases = [(ROOT / name).parent]
    elif link:
        bases = sorted({(ROOT / other).parent for other in tracked_files() if other.endswith(".md")})
    else:
        bases = [(ROOT / name).parent, ROOT]
    return [Path(os.path.normpath(base / reference)) for base in bases]


def github_anchor(heading: str) -> str:
    """The ``#anchor`` GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def anchors(name: str) -> frozenset[str]:
    """The anchors of a tracked Markdown file's headings (repeats get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            anchor = github_anchor(match.group(1))
            found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
            seen[anchor] = seen.get(anchor, 0) + 1
    return frozenset(found)


def design_references(name: str, text: str) -> list[str]:
    """References to a design document that are not docs/design.md and one of its headings."""
    wrong = []
    for match in DESIGN_REFERENCE.finditer(text):
        path, anchor = match.group(0).partition("#")[0], match.group(1)
        if DESIGN not in {inside_repository(target) for target in resolve(name, path, in_link(text, match))}:
            wrong.append(f"{name}: {match.group(0)} is not {DESIGN}")
        elif anchor and anchor not in anchors(DESIGN):
            wrong.append(f"{name}: {match.group(0)}: {DESIGN} has no heading #{anchor}")
    return wrong


def paths_outside(name: str, text: str) -> list[str]:
    """Relative paths that climb out of the repository, and paths into the development workspace."""
    outside = []
    for match in CLIMBING_PATH.finditer(text):
        if any(inside_repository(target) is None for target in resolve(name, match.group(0), in_link(text, match))):
            outside.append(f"{name}: {match.group(0)} leaves the repository")
    outside += [f"{name}: {match.group(0)} is the development workspace" for match in WORKSPACE_PATH.finditer(text)]
    return outside


def broken_markdown_links(name: str, text: str) -> list[str]:
    """Relative links of a Markdown file that miss a tracked file or a heading of it."""
    if not name.endswith(".md"):
        return []
    broken = []
    for link in MARKDOWN_LINK.findall(text):
        if URL.match(link):
            continue
        path, _, anchor = link.partition("#")
        target = inside_repository(resolve(name, path, link=True)[0]) if path else name
        if target not in tracked_files():
            broken.append(f"{name}: ({link}) is not a tracked file")
        elif anchor and target.endswith(".md") and anchor not in anchors(target):
            broken.append(f"{name}: ({link}) has no heading #{anchor}")
    return broken


def test_every_design_reference_is_docs_design_md() -> None:
    assert DESIGN in tracked_files()
    for name, text in [("tests/conftest.py", f"fast group joins ({BRIEF.upper()} 6)"),
                       ("emitter/outcomes.py", f"see {OUTSIDE}/{BRIEF} section 3"),
                       ("README.md", "[design](design.md)"),
                       ("queries/docs.py", "docs/design.md#no-such-section")]:
        assert design_references(name, text), text
    assert not design_references("emitter/outcomes.py", "(docs/design.md#events)")
    assert not design_references("docs/views.md", "[it](design.md#metric-definitions)")
    wrong = problems(design_references)
    assert not wrong, "\n".join(wrong)


def test_no_path_leads_outside_the_repository() -> None:
    for name, text in [("README.md", f"the brief in {OUTSIDE}/"), ("tests/ingest/x.py", "../../../x"),
                       ("docs/views.md", "[x](../../y.md)"), ("docs/x.md", "/work/main/.venv")]:
        assert paths_outside(name, text), text
    assert not paths_outside("tests/deploy/x.py", 'GET "/../secret.txt"')  # a URL path, not a file
    outside = problems(paths_outside)
    assert not outside, "\n".join(outside)


def test_markdown_links_reach_tracked_files_and_headings() -> None:
    assert broken_markdown_links("README.md", "[a](docs/missing.md) [b](#no-such-heading) [c](BENCHMARKS.md#nope)")
    assert not broken_markdown_links("README.md", "[a](docs/design.md#glossary) [b](#commands) [c](https://x.org/y)")
    broken = problems(broken_markdown_links)
    assert not broken, "\n".join(broken)
