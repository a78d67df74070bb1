"""The layout's rules, read from the source with ``ast``: no import cycles, each step of the data
flow imports only what it may, and the README's "Files" section matches the tree.

Every import counts, function-level and ``TYPE_CHECKING`` ones included: a cycle hidden inside a
function is still a cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("clawd", "adapters", "ui", "bench", "tests")
SHARED = ("clawd.config", "clawd.models", "clawd.chattemplate", "clawd.tinymodel")

# importer prefix -> prefixes it must not import (a prefix matches itself and what is below it)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "clawd.store": (
        "clawd.serving", "clawd.signals", "clawd.training", "clawd.cli", "clawd.scheduler",
        "adapters", "ui",
    ),
    "clawd.signals": (
        "clawd.serving", "clawd.training", "clawd.cli", "clawd.scheduler", "adapters", "ui",
    ),
    "clawd.training": ("clawd.serving", "clawd.cli", "clawd.scheduler", "ui"),
    "clawd.serving": ("clawd.training", "clawd.cli", "ui"),
    "adapters": ("clawd.training", "clawd.signals", "clawd.cli", "clawd.scheduler", "ui"),
    "bench": ("tests",),
    **{
        shared: (
            "clawd.serving", "clawd.store", "clawd.signals", "clawd.training", "clawd.cli",
            "clawd.scheduler", "adapters", "ui",
        )
        for shared in SHARED
    },
}  # fmt: skip
UI_MAY_IMPORT = ("clawd.config",)  # the UI reaches the daemon over REST; config gives the token


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
    assert "ui.app" in edges["clawd.cli.main"]
    # `from clawd.store import record` is an edge to the module clawd.store.record
    assert "clawd.store.record" in edges["clawd.serving.chat"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_each_step_imports_only_what_it_may() -> None:
    broken = []
    for name, targets in graph().items():
        for importer, banned in FORBIDDEN.items():
            if under(name, importer):
                bad = [t for t in targets if any(under(t, b) for b in banned)]
                broken += [f"{name} imports {t}" for t in bad]
        if under(name, "ui"):
            broken += [
                f"{name} imports {t} (the UI may use only {', '.join(UI_MAY_IMPORT)})"
                for t in targets
                if (under(t, "clawd") and t != "clawd" and t not in UI_MAY_IMPORT)
                or under(t, "adapters")
            ]
    assert not broken, "\n".join(broken)


def test_clawd_holds_few_modules_of_its_own() -> None:
    own = sorted(p.name for p in (ROOT / "clawd").glob("*.py"))
    assert len(own) <= 8, own
    for package in ("serving", "store", "signals", "training", "cli"):
        init = ROOT / "clawd" / package / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and "In:" in doc and "Out:" in doc and "must not" in doc.lower(), init


def readme_files() -> list[str]:
    """The paths the README's "Files" section names, folders resolved by indentation."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^## Files\n.*?^```\n(.*?)^```", text, re.S | re.M)
    assert block, "the README has no Files section with a tree"
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


def test_every_path_the_readme_names_exists() -> None:
    paths = readme_files()
    assert "clawd/serving/app.py" in paths and ".ci/run" in paths
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"README names paths that do not exist: {missing}"


def test_the_readme_names_every_module() -> None:
    named = set(readme_files())
    unnamed = [
        str(path.relative_to(ROOT))
        for package in ("clawd", "adapters", "ui", "bench")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and str(path.relative_to(ROOT)) not in named
    ]
    assert not unnamed, f"modules missing from the README's Files section: {unnamed}"
