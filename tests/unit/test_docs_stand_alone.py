"""The docs stand alone: no page, example or code comment cites a file the repository does not
have. Three checks over every text file of the repository (docs/*.md, README.md, examples/,
the code and its comments, the chart, the scripts; measurement records in docs/results/ are
data, not text): no path outside it (the project's working notes, `/work/...`, a design
document or the seeds' files, which readers never get); every path that starts with one of the
repository's own top-level directories (`docs/...`, `tests/unit/test_x.py::test_y`, ...) names
a file or directory that exists; every relative Markdown link resolves, its `#anchor` too when it
names a heading of a Markdown page (the performance rounds in docs/results/*.md are checked like
any page)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from planops.engine.facts import Kind

ROOT = Path(__file__).resolve().parents[2]
#: generated or local-only: never part of the repository (.gitignore)
SKIPPED_DIRS = {"__pycache__", "build", "dist", "mutants", "node_modules"}
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".tpl", ".txt", ".toml", ".sh", ".lua", ".sql", ""}
#: text that cites what only the project's authors have
OUTSIDE = re.compile(r"(?<![\w-])shared/|/work/|DESIGN\.md|seeds/|\b00[0-9]_[\w-]+\.md")
#: a relative Markdown link: [text](target)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def repository_files() -> list[Path]:
    """Every file of the checkout but what .gitignore keeps out of the repository (hidden
    directories but .ci, caches, the virtualenv, build output)."""
    found = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(p in SKIPPED_DIRS or p.endswith(".egg-info") for p in rel.parts[:-1]):
            continue
        if rel.parts[0].startswith(".") and rel.parts[0] != ".ci":
            continue
        if path.is_file():
            found.append(path)
    return found


FILES = repository_files()
EXISTING_FILES_AT_TOP = {p.name for p in FILES if p.parent == ROOT}
EXISTING = {str(p.relative_to(ROOT)) for p in FILES} | {
    str(parent) for p in FILES for parent in p.relative_to(ROOT).parents if str(parent) != "."
}
TOP_DIRS = sorted({p.relative_to(ROOT).parts[0] for p in FILES} - EXISTING_FILES_AT_TOP)
#: a path that starts with one of the repository's top-level directories
_TOPS = "|".join(re.escape(d) for d in TOP_DIRS)
REPO_PATH = re.compile(rf"(?<![\w./~-])((?:{_TOPS})/[\w./*<>…{{}}$-]*)")


def texts() -> list[Path]:
    return [
        p
        for p in FILES
        if p.suffix in TEXT_SUFFIXES
        and not (str(p.relative_to(ROOT)).startswith("docs/results/") and p.suffix != ".md")
        and p.name != "test_docs_stand_alone.py"  # its own patterns
        and "vendor" not in p.relative_to(ROOT).parts
    ]


def cited_outside(text: str) -> list[str]:
    return [m.group(0) for m in OUTSIDE.finditer(text)]


def missing_paths(text: str) -> list[str]:
    """The repository paths `text` names that do not exist (a pattern, with `*`, `<...>`, `…`
    or a template's braces, is a shape, not a path)."""
    out = []
    for m in REPO_PATH.finditer(text):
        path = m.group(1).split("::")[0].rstrip(".,:;)'\"`/")
        if any(c in path for c in "*<>…{}$"):
            continue
        if path not in EXISTING:
            out.append(path)
    return out


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: markup and punctuation dropped, lower case,
    each space a hyphen (`## The archive A/B, 2026-12-03` -> `the-archive-ab-2026-12-03`)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a Markdown text (fenced code left out); a repeated heading's
    later anchors get -1, -2, ... as GitHub numbers them."""
    found: set[str] = set()
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6} (.+)", line)
        if m:
            base = slug(m.group(1))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def broken_links(doc: Path, text: str) -> list[str]:
    out = []
    for m in LINK.finditer(text):
        target, _, fragment = m.group(1).partition("#")
        if re.match(r"^[a-z]+:", target):  # a URL
            continue
        path = doc.parent / target if target else doc
        if not path.exists():
            out.append(m.group(1))
        elif fragment and path.suffix == ".md":
            page = text if path == doc else path.read_text()
            if fragment not in anchors(page):
                out.append(m.group(1))
    return out


def test_the_checks_find_what_they_look_for():
    assert cited_outside("see shared/seeds/000_plans.md and /work/main") == [
        "shared/",
        "seeds/",
        "000_plans.md",
        "/work/",
    ]
    assert cited_outside("the DESIGN.md of the project") == ["DESIGN.md"]
    assert cited_outside("/work/cluster-shared/admin.kubeconfig")[0] == "/work/"
    assert cited_outside("cluster-shared and kopf's shared state; the seeds' report") == []
    assert missing_paths(
        "`docs/cli.md`, `tests/unit/test_docs_stand_alone.py::test_x`, docs/nope.md, "
        "tests/unit/test_*.py, `docs/<page>.md`, examples/none.yaml."
    ) == ["docs/nope.md", "examples/none.yaml"]
    assert missing_paths("its docs/scaling.md") == ["docs/scaling.md"]
    doc = ROOT / "docs" / "install.md"
    assert broken_links(doc, "[a](security.md#x) [b](nope.md) [c](https://x.io) [d](#here)") == [
        "security.md#x",
        "nope.md",
        "#here",
    ]
    assert broken_links(doc, "# Here\n[d](#here) [e](security.md)") == []
    assert slug("The archive A/B, 2026-12-03") == "the-archive-ab-2026-12-03"
    assert slug("The queue of a Capsule (bench/capsule_queue.py)") == (
        "the-queue-of-a-capsule-benchcapsule_queuepy"
    )
    assert slug("Step output — the [peers](x.md)") == "step-output--the-peers"
    assert anchors("# A\n```\n# not a heading\n```\n## A") == {"a", "a-1"}


@pytest.mark.parametrize("path", texts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_text_cites_a_file_the_repository_does_not_have(path: Path):
    text = path.read_text(errors="replace")
    problems = cited_outside(text) + [f"{p} (no such file)" for p in missing_paths(text)]
    if path.suffix == ".md":
        problems += [f"link {t} (no such file)" for t in broken_links(path, text)]
    assert problems == [], f"{path.relative_to(ROOT)} cites {problems}"


#: step kinds of other workflow engines that the plan language does not have (its kinds:
#: engine.facts.Kind); a doc that names one as a planops step misleads (a `foreach` was named)
NOT_KINDS = ("foreach", "for-each", "forEach", "loop", "switch", "suspend")
_NOT = "|".join(NOT_KINDS)
NAMED_KIND = re.compile(
    rf"\b({_NOT})\b[`*]* (?:(?:and|or) \w+ )?steps?\b"
    rf"|\b\w+ (?:and|or) [`*]*({_NOT})\b[`*]* steps?\b",
    re.IGNORECASE,
)


def test_the_docs_name_only_step_kinds_the_language_has():
    assert not set(NOT_KINDS) & set(get_args(Kind))
    assert NAMED_KIND.search("(capsule and foreach steps)")
    assert NAMED_KIND.search("a `loop` step") and not NAMED_KIND.search("a map step")
    docs = [p for p in texts() if p.suffix == ".md"]
    named = {
        str(p.relative_to(ROOT)): [m.group(0) for m in NAMED_KIND.finditer(p.read_text())]
        for p in docs
    }
    assert {k: v for k, v in named.items() if v} == {}
