"""docs/performance.md stays a reference and the code says why, not when it was measured.

The page holds today's figures, how to reproduce each and what bounds it; the dated rounds that
led there live in docs/results/ (their index: docs/results/README.md). Left alone, the page grew
to 1,800 lines of history a reader had to dig today's figures out of, and code comments cited
"round 8" of one bench or another (three benches number their rounds apart, so such a citation
does not even say which). A comment that needs the evidence names the page and its section."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "performance.md"
#: the reference's bound: past it, the history is creeping back in (move it to docs/results/)
MAX_LINES = 400
#: where code lives: its comments, docstrings and names
CODE_DIRS = ("operator", "bench", "tests")
CODE_SUFFIXES = {".py", ".sh", ".yaml", ".yml", ".toml", ".txt", ""}
SKIPPED_DIRS = {"__pycache__", "vendor", "node_modules"}
#: a measurement round by its number: "round 8", "Round12", "rounds 7 and 8", ROUND_4_...
#: (not a `--rounds N` option, not "around 5")
ROUND = re.compile(r"(?<![-\w])rounds?[ _-]?\d+", re.IGNORECASE)
RESULTS = ROOT / "docs" / "results"


def code_files() -> list[Path]:
    return [
        p
        for d in CODE_DIRS
        for p in sorted((ROOT / d).rglob("*"))
        if p.is_file()
        and p.suffix in CODE_SUFFIXES
        and not SKIPPED_DIRS & set(p.relative_to(ROOT).parts)
        and not any(part.endswith(".egg-info") for part in p.relative_to(ROOT).parts)
        and p != Path(__file__).resolve()  # its own examples
    ]


def rounds_cited(text: str) -> list[str]:
    return [m.group(0) for m in ROUND.finditer(text)]


def test_the_round_pattern_finds_what_it_looks_for():
    assert rounds_cited("(docs/performance.md, round 8); Round12; rounds 7 and 8; round-3") == [
        "round 8",
        "Round12",
        "rounds 7",
        "round-3",
    ]
    assert rounds_cited("ROUND_4_FIGURES = {") == ["ROUND_4"]
    assert rounds_cited("[--rounds 20]; around 5 s; each round drops; round_trip(3)") == []


def test_performance_md_is_a_reference_of_at_most_400_lines():
    lines = PAGE.read_text().count("\n")
    assert lines <= MAX_LINES, (
        f"docs/performance.md has {lines} lines (at most {MAX_LINES}): keep today's figures, "
        "how to reproduce them and what bounds them; move a round's write-up to docs/results/"
    )


def test_every_round_write_up_is_in_the_results_index():
    index = (RESULTS / "README.md").read_text()
    write_ups = sorted(p.name for p in RESULTS.glob("*.md") if p.name != "README.md")
    assert write_ups, "the rounds' write-ups are in docs/results/*.md"
    assert [n for n in write_ups if f"]({n})" not in index] == []
    for name in write_ups:
        head = (RESULTS / name).read_text().splitlines()[:4]
        assert any("as of" in line for line in head), f"{name}: say names are as of its date"


def test_no_code_comment_cites_a_performance_rounds_number():
    """Code says why, not when it was measured: a dated round belongs to docs/results/, which
    a comment may name by its page and section."""
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in code_files()
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if rounds_cited(line)
    ]
    assert found == []
