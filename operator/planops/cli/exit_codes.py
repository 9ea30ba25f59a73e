"""What kubectl-plan exits with: a contract scripts depend on, so one table here, which
docs/cli.md shows as it is (a unit test compares) and every verb returns from.
"""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INPUT = 2
EXIT_CLUSTER = 3
EXIT_ERROR_EXIT = 4
EXIT_NO_CAPSULE = 5
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a process killed by SIGPIPE

#: (code, meaning): every code any verb returns
TABLE: tuple[tuple[int, str], ...] = (
    (
        EXIT_OK,
        "success: every plan valid (`validate`, `graph FILE`), the plan completed (`run "
        "--local`), Succeeded (`submit --wait`, `graph NAME --watch`), done (the other verbs)",
    ),
    (
        EXIT_FAILED,
        "a plan is invalid (`validate`, `graph FILE`: the validator's refusals), the plan did "
        "not complete: a failure or its `activeDeadlineSeconds` stopped it (`run --local`, as "
        "the cluster's Failed), Failed or still running at `--timeout` (`submit --wait`), "
        "Failed or deleted (`graph --watch`), Plans not gone at `--timeout` (`delete --wait`)",
    ),
    (
        EXIT_INPUT,
        "unusable input: a file that cannot be read, malformed YAML/JSON, a schema error (unknown "
        "field, wrong type), a bad option; `run --local` of a plan the validator refuses (nothing "
        "ran); `submit` refused by the cluster or Invalid; a Plan or step that does not exist",
    ),
    (
        EXIT_CLUSTER,
        "the cluster could not be reached or refused the request, or the kubeconfig is missing",
    ),
    (EXIT_ERROR_EXIT, "`run --local`: the plan was ended by an `exit` step with status error"),
    (
        EXIT_NO_CAPSULE,
        "the plan's Capsule was not given (`validate`, `run --local`, `graph FILE`): pass its "
        "file with `--capsule FILE`, or name another in `spec.capsule`",
    ),
    (
        EXIT_INTERRUPTED,
        "interrupted (Ctrl-C): `run --local` (every step process was stopped), `get --watch` "
        "and `logs -f` (how they end before the plan does)",
    ),
    (
        EXIT_BROKEN_PIPE,
        "stdout was closed early (`... | head -1`): it stops quietly, as a Unix tool killed by "
        "SIGPIPE",
    ),
)


def markdown() -> str:
    """The table as docs/cli.md shows it."""
    rows = ["| exit | meaning |", "|---|---|"]
    bar = "\\|"  # a literal | inside a table cell
    rows += [f"| {code} | {meaning.replace('|', bar)} |" for code, meaning in TABLE]
    return "\n".join(rows) + "\n"
