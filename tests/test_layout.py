"""The layout's rules, read from the source with ``ast``: no import cycles (between modules and
between packages), each step of the data flow reaches only what it may (through any chain of
imports), product code never imports tests, benchmarks or fixtures, and the code map
(``docs/code.md``, which the README's "Files" links) matches the tree.

Every import counts, function-level and ``TYPE_CHECKING`` ones included: a cycle hidden inside a
function is still a cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("clawd", "bench", "fixtures", "tests")
SHARED = (
    "clawd.config",
    "clawd.configfile",
    "clawd.models",
    "clawd.chattemplate",
    "clawd.trainlock",
    "clawd.threads",
)
STEPS = ("clawd.serving", "clawd.store", "clawd.signals", "clawd.training", "clawd.adapters")
NOT_PRODUCT = ("bench", "fixtures", "tests")

# The one table of rules: importer prefix -> prefixes it must not reach, directly or through
# any chain of imports (a prefix matches itself and what is below it). Each step's package
# docstring names what it must not import; a test holds them to this table.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "clawd": NOT_PRODUCT,
    "clawd.store": (
        "clawd.serving", "clawd.signals", "clawd.training", "clawd.cli", "clawd.adapters",
        "clawd.ui",
    ),
    "clawd.signals": (
        "clawd.serving", "clawd.training", "clawd.cli", "clawd.adapters", "clawd.ui",
    ),
    "clawd.training": ("clawd.serving", "clawd.cli", "clawd.ui"),
    "clawd.serving": ("clawd.training", "clawd.cli", "clawd.ui"),
    "clawd.adapters": (
        "clawd.serving", "clawd.training", "clawd.signals", "clawd.cli", "clawd.ui",
    ),
    # the UI reaches the daemon over REST; clawd.config gives it the token
    "clawd.ui": (*STEPS, "clawd.cli", "clawd.models", "clawd.chattemplate", "clawd.trainlock"),
    "bench": ("tests",),
    "fixtures": ("tests", "bench"),
    **{shared: (*STEPS, "clawd.cli", "clawd.ui") for shared in SHARED},
}  # fmt: skip


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports, wherever in the file the import statement is."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports the module pkg.mod when there is one
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target.split(".")[0] not in PACKAGES:
                continue
            # importing a.b.c runs a and a.b first
            parts = target.split(".")
            out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    out.discard(name)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, name, known) & known.keys() for name, path in known.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_reader_sees_every_kind_of_import() -> None:
    edges = graph()
    # a function-level import (inside the CLI's chat command) is an edge too
    assert "clawd.ui.app" in edges["clawd.cli.main"]
    # `from clawd.store import record` is an edge to the module clawd.store.record
    assert "clawd.store.record" in edges["clawd.serving.chat"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def reach(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Every module each module imports, directly or through others."""
    out: dict[str, set[str]] = {}
    for start in edges:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        out[start] = seen - {start}
    return out


def package_of(name: str) -> str:
    """The step a module belongs to (``clawd.serving``), or the module itself if shared."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "clawd" and len(parts) > 2 else name


def test_each_step_reaches_only_what_it_may() -> None:
    edges = graph()
    broken = []
    for name, targets in reach(edges).items():
        for importer, banned in FORBIDDEN.items():
            if under(name, importer):
                bad = sorted(t for t in targets if any(under(t, b) for b in banned))
                broken += [f"{name} reaches {t}" for t in bad]
    assert not broken, "\n".join(broken)


def test_no_cycles_between_packages() -> None:
    edges: dict[str, set[str]] = {}
    for name, targets in graph().items():
        if under(name, "clawd"):
            own = package_of(name)
            edges.setdefault(own, set()).update(
                package_of(t) for t in targets if under(t, "clawd") and package_of(t) != own
            )
    edges.pop("clawd", None)  # the root package's __init__ imports nothing
    cycle = find_cycle({k: v - {"clawd"} for k, v in edges.items()})
    assert cycle is None, "package cycle: " + " -> ".join(cycle or [])


def test_each_package_names_the_rules_of_the_table() -> None:
    for importer, banned in FORBIDDEN.items():
        init = ROOT / importer.replace(".", "/") / "__init__.py"
        if not importer.startswith("clawd.") or not init.exists():
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "In:" in doc and "Out:" in doc and "must not" in doc.lower(), init
        named = set(re.findall(r"``([\w.]+)``", doc.replace("\n", " ")))
        missing = [b for b in banned if b not in named and b.split(".")[-1] not in doc]
        assert not missing, f"{init} does not say it must not import {missing}"


def test_clawd_holds_few_modules_of_its_own() -> None:
    own = sorted(p.name for p in (ROOT / "clawd").glob("*.py"))
    assert len(own) <= 8, own


def code_map() -> list[str]:
    """The paths the code map (``docs/code.md``) names, folders resolved by indentation."""
    text = (ROOT / "docs" / "code.md").read_text(encoding="utf-8")
    block = re.search(r"^```\n(.*?)^```", text, re.S | re.M)
    assert block, "docs/code.md holds no tree"
    paths, folders = [], []  # folders: the open folder at each depth
    for line in block.group(1).splitlines():
        match = re.match(r"^( *)(\S+)(\s{2,}|$)", line)
        indent = len(line) - len(line.lstrip(" "))
        if not match or indent % 2 or indent > 8:
            continue  # a description's continuation line
        depth, name = indent // 2, match.group(2)
        del folders[depth:]
        paths.append("/".join([*folders, name.rstrip("/")]))
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
    return paths


def test_every_path_the_code_map_names_exists() -> None:
    paths = code_map()
    assert "clawd/serving/app.py" in paths and ".ci/run" in paths
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"docs/code.md names paths that do not exist: {missing}"


def test_the_code_map_names_every_module() -> None:
    named = set(code_map())
    unnamed = [
        str(path.relative_to(ROOT))
        for package in ("clawd", "bench", "fixtures")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and str(path.relative_to(ROOT)) not in named
    ]
    assert not unnamed, f"modules missing from docs/code.md: {unnamed}"
