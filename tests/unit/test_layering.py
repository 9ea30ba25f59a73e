"""The engine and the api layer are pure: no kopf, no kubernetes, no I/O layers
(docs/architecture.md)."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "planops"
FORBIDDEN = (
    "kopf",
    "kubernetes",
    "planops.kube",
    "planops.handlers",
    "planops.runners",
    "planops.cli",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_engine_and_api_import_no_kubernetes_kopf_or_executors():
    offenders = []
    for layer in ("engine", "api"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for name in _imports(path):
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                    offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert offenders == []


def test_importing_the_engine_loads_neither_kopf_nor_kubernetes():
    code = (
        "import sys, planops.engine, planops.api; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kopf', 'kubernetes')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_standard_library_operator_module_is_not_shadowed():
    root = PACKAGE.parents[1]
    code = "import operator; print(operator.itemgetter(1)([0, 42]))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True
    )
    assert out.stdout.strip() == "42"
    assert not (root / "operator" / "__init__.py").exists()


def test_only_planops_kube_imports_the_kubernetes_client_and_only_the_adapter_imports_kopf():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "kubernetes" and not rel.startswith("kube/"):
                offenders.append(f"{rel} imports {name}: only planops.kube talks to the API")
            if top == "kopf" and rel != "handlers/kopf_adapter.py":
                offenders.append(f"{rel} imports {name}: kopf belongs to handlers.kopf_adapter")
    assert offenders == []


def test_no_file_of_the_project_shadows_the_standard_library_operator_module():
    """A script named operator.py on sys.path breaks `import enum` (it imports `operator`)."""
    root = PACKAGE.parents[1]
    # the project's own files: not .venv, nor a test cluster's state (.cluster*: a node's image
    # snapshots hold a whole Debian, whose stdlib has its own operator.py), nor .git or .image
    shadows = [
        p
        for p in root.rglob("operator.py")
        if not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    assert shadows == []


def _engine_imports(path: Path) -> set[str]:
    """The planops.engine modules `path` imports, type-only imports included
    (`from planops.engine import x` names module x when x is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "planops.engine":
                found |= {f"planops.engine.{a.name}" for a in node.names}
            elif node.module.startswith("planops.engine."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("planops.engine.")}
    return found


def test_the_engine_has_no_import_cycle_even_counting_type_only_imports():
    import graphlib  # noqa: PLC0415

    engine = PACKAGE / "engine"
    modules = {
        "planops." + ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts[1:]): p
        for p in engine.rglob("*.py")
    }
    modules = {
        (name.removesuffix(".__init__")): p
        for name, p in modules.items()
        if name != "planops.engine.__init__"  # the package's re-exports, loaded lazily
    }
    graph = {
        name: {m for m in _engine_imports(p) if m in modules and m != name}
        for name, p in modules.items()
    }
    # a package's modules import one another through it: its own __init__ is not an edge
    graph = {n: {m for m in deps if not n.startswith(m + ".")} for n, deps in graph.items()}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError on a cycle


def test_outside_the_reconciler_only_its_public_names_are_imported():
    """The handlers, the entry point and the CLI use what planops.reconciler names, never one of
    its modules: the reconciler's modules can be cut and joined without touching them."""
    inside = PACKAGE / "reconciler"
    for path in PACKAGE.rglob("*.py"):
        if inside in path.parents:
            continue
        reaching = sorted(m for m in _imports(path) if m.startswith("planops.reconciler."))
        assert reaching == [], f"{path.relative_to(PACKAGE)} imports {reaching}"


def test_every_module_of_the_operator_stays_within_500_lines():
    """Small modules with names that explain themselves: past 500 lines a module holds more than
    one idea (split it along its seam, as reconcile.py and scheduled.py were)."""
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert long == {}


def test_in_the_reconciler_only_the_actuator_writes():
    """Read -> decide -> act: a reconcile's reads (effects/reads.py), its decisions and its shells
    make no write request; every create, delete and patch is effects/actuator.py's (the status
    writer's too). A call of a client's create_/delete_/patch_ method anywhere else fails here."""
    inside = PACKAGE / "reconciler"
    writes = ("create_", "delete_", "patch_")
    offenders = []
    for path in sorted(inside.rglob("*.py")):
        if path == inside / "effects" / "actuator.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith(writes)
                and ast.unparse(node.func.value).endswith("kube")
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


def test_no_function_of_the_reconciler_is_over_80_lines_or_8_parameters():
    """A function a reader takes in at once: at most 80 lines and 8 parameters (a parameter
    object past that: run.status.Progress, effects.announcing.Decided). ruff's C901, PLR0913
    and PLR0915 (pyproject.toml) bound complexity, arguments and statements everywhere; ruff has
    no rule for lines, hence this one."""
    long = []
    for path in sorted((PACKAGE / "reconciler").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            params = [a for a in params if a.arg not in ("self", "cls")]
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > 80 or len(params) > 8:
                where = f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"
                long.append(f"{where}: {lines} lines, {len(params)} parameters")
    assert long == []
