"""What the docs say about the command lines is what the code does: the operator's usage line
is made from its parser, and the exit codes are one table, made from cli/exit_codes.py."""

from __future__ import annotations

import re
from pathlib import Path

from planops.cli import exit_codes
from planops.main import usage

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_operators_usage_line_in_the_docs_is_its_parsers():
    shown = "\n".join("    " + line for line in usage().rstrip("\n").split("\n"))
    assert shown + "\n" in (ROOT / "docs" / "operator.md").read_text()


def test_the_operators_usage_line_names_every_option_with_its_default():
    text = usage()
    for option in (
        "--workers 8",
        "--max-cpu",
        "--max-memory",
        "--webhook-port 0",
        "--leader-elect",
    ):
        assert option in text


def test_the_exit_codes_table_in_the_docs_is_the_codes_table():
    assert exit_codes.markdown() in (ROOT / "docs" / "cli.md").read_text()


def test_no_other_doc_lists_exit_codes_of_its_own():
    """A second list drifts (troubleshooting.md once said 1 meant "failed or invalid"): the
    others point at the table."""
    listing = re.compile(r"exit codes[^.|]*: 0 ", re.IGNORECASE)
    for doc in DOCS:
        assert not listing.search(doc.read_text()), doc.name


def test_every_exit_code_the_cli_returns_is_in_the_table():
    codes = {code for code, _ in exit_codes.TABLE}
    source = "\n".join(p.read_text() for p in (ROOT / "operator" / "planops" / "cli").rglob("*.py"))
    named = set(re.findall(r"\b(EXIT_[A-Z_]+)\b", source)) - {"EXIT_CODES"}
    assert {getattr(exit_codes, name) for name in named} <= codes
    assert len(codes) == len(exit_codes.TABLE)


def test_the_docs_agree_the_webhook_covers_scheduled_plans():
    """schedules.md once said the webhook was not yet built while README and install.md said it
    worked (for Plans only, as it then was)."""
    schedules = (ROOT / "docs" / "schedules.md").read_text()
    assert "not yet built" not in schedules
    for doc in ("README.md", "docs/install.md", "docs/schedules.md", "docs/security.md"):
        text = " ".join((ROOT / doc).read_text().split())
        assert re.search(r"webhook.{0,120}ClusterScheduledPlan", text), doc
