"""The package's layers (README, "Layers"), its import graph, and the module-size budget.

The import graph is read from the source (AST), so it sees every ``import rlvr...`` / ``from rlvr... import``
statement in ``rlvr/``, relative ones included. Decisions:

- Imports inside functions count, for the layer order and for cycles alike. A lazy import still makes the
  importing module depend on the imported one; it only moves the failure from import time to call time.
- Importing ``rlvr.a.b`` from outside ``rlvr.a`` also runs ``rlvr/a/__init__.py``; the graph has that edge
  too, so a cycle through a package's ``__init__`` counts. Dynamic imports by string
  (``importlib.import_module(name)``) are not seen.
- The modules and packages are read from the filesystem: a new module inside a package is checked at once,
  a new top-level package fails :func:`test_every_package_has_a_layer` until the README names its layer.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rlvr"
README = ROOT / "README.md"
MAX_LINES = 400
SIZE_EXCEPTIONS: dict[str, str] = {}  # "rlvr/x.py" -> why it may exceed MAX_LINES (none today)


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (the longest prefix of the imported name that is a module of the package)
    line: int
    lazy: bool  # inside a function


def module_names(pkg_dir: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file under ``pkg_dir`` (a package's ``__init__.py``
    is the package's name)."""
    out = {}
    for path in sorted(pkg_dir.rglob("*.py")):
        parts = list(path.relative_to(pkg_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The package-internal imports of one module, module-level and inside functions."""
    root = module.split(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    in_function = {id(sub) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for sub in ast.walk(node) if sub is not node}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                full = ".".join(base + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            # ``from pkg import sub`` imports the module pkg.sub when there is one, else names from pkg
            names = [f"{full}.{a.name}" if f"{full}.{a.name}" in modules else full for a in node.names]
        for name in names:
            if name == root or name.startswith(root + "."):
                target = _resolve(name, modules)
                if target is not None and target != module:
                    out.append(Import(module, target, node.lineno, id(node) in in_function))
    return out


def import_graph(pkg_dir: Path) -> list[Import]:
    modules = module_names(pkg_dir)
    return [imp for mod, path in modules.items() for imp in imports_of(mod, path, modules)]


def _executed(imp: Import, modules: set[str]) -> list[str]:
    """The modules an import runs: the packages it enters from outside (their ``__init__``), then the target."""
    parts = imp.target.split(".")
    inits = [".".join(parts[:i]) for i in range(2, len(parts))]
    entered = [p for p in inits if p in modules and not (imp.source == p or imp.source.startswith(p + "."))]
    return entered + [imp.target]


def cycles(edges: list[Import], modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for imp in edges:
        graph[imp.source].update(t for t in _executed(imp, modules) if t != imp.source)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def readme_layers(text: str) -> list[list[str]]:
    """The README's layer list, lowest first: one list of names (``core``, ``config.errors``) per layer."""
    block = re.search(r"<!-- layers: lowest first -->\n(.*?)<!-- /layers -->", text, re.S)
    assert block, "README.md lost its layer list (<!-- layers: lowest first --> ... <!-- /layers -->)"
    layers = []
    for n, line in enumerate(block.group(1).strip().splitlines(), 1):
        m = re.match(r"(\d+)\. (.*?)(?: — .*)?$", line)
        assert m and int(m.group(1)) == n, f"README layer line {n} is not '{n}. `name`, ... — what': {line!r}"
        layers.append(re.findall(r"`([\w.]+)`", m.group(2)))
    return layers


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The layer of the longest layer name that is ``module`` or a package above it; the bare root package
    (``rlvr/__init__.py``, a version string) is below every layer."""
    root, _, rest = module.partition(".")
    if not rest:
        return -1
    best, best_len = None, -1
    for i, names in enumerate(layers):
        for name in names:
            if (rest == name or rest.startswith(name + ".")) and len(name) > best_len:
                best, best_len = i, len(name)
    return best


def layer_violations(edges: list[Import], layers: list[list[str]]) -> list[str]:
    out = []
    for imp in edges:
        src, dst = layer_of(imp.source, layers), layer_of(imp.target, layers)
        if src is not None and dst is not None and dst > src:
            out.append(f"{imp.source}:{imp.line} ({'inside a function' if imp.lazy else 'module level'}) imports "
                       f"{imp.target}: layer {dst + 1} {layers[dst]} is above layer {src + 1} {layers[src]}")
    return out


# ---- the package -------------------------------------------------------------------------------------------

def test_every_package_has_a_layer():
    layers = readme_layers(README.read_text())
    modules = module_names(PACKAGE)
    missing = sorted({m.split(".")[1] for m in modules if "." in m and layer_of(m, layers) is None})
    assert not missing, f"add these to the README's layer list: {missing}"
    stale = [n for names in layers for n in names if f"rlvr.{n}" not in modules]
    assert not stale, f"the README's layer list names modules that do not exist: {stale}"


def test_imports_follow_the_layer_order():
    bad = layer_violations(import_graph(PACKAGE), readme_layers(README.read_text()))
    assert not bad, "imports against the README's layer order:\n" + "\n".join(bad)


def test_no_import_cycles():
    found = cycles(import_graph(PACKAGE), set(module_names(PACKAGE)))
    assert not found, f"import cycles: {found}"


def test_module_size_budget():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in module_names(PACKAGE).values()}
    over = {f: n for f, n in sizes.items() if n > MAX_LINES and f not in SIZE_EXCEPTIONS}
    assert not over, f"modules over {MAX_LINES} lines (split them): {over}"
    assert all(f in sizes for f in SIZE_EXCEPTIONS), "SIZE_EXCEPTIONS names a module that no longer exists"


# ---- the checker itself, on a made-up package ------------------------------------------------------------------

LAYERS = [["low"], ["mid", "low.adapter"], ["high"]]


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", "low/__init__.py": "", "mid/__init__.py": "", "high.py": "",
                      "low/base.py": "", "mid/a.py": "", "mid/b.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_checker_finds_a_module_level_cycle(tmp_path):
    pkg = _package(tmp_path, {"mid/a.py": "import pkg.mid.b\n", "mid/b.py": "from pkg.mid.a import x\n"})
    assert cycles(import_graph(pkg), set(module_names(pkg))) == [["pkg.mid.a", "pkg.mid.b"]]


def test_checker_finds_a_cycle_through_a_function_level_import(tmp_path):
    pkg = _package(tmp_path, {"mid/a.py": "from . import b\n",
                              "mid/b.py": "def f():\n    from pkg.mid.a import x\n    return x\n"})
    edges = import_graph(pkg)
    assert {(e.source, e.target, e.lazy) for e in edges} == {("pkg.mid.a", "pkg.mid.b", False),
                                                             ("pkg.mid.b", "pkg.mid.a", True)}
    assert cycles(edges, set(module_names(pkg))) == [["pkg.mid.a", "pkg.mid.b"]]


def test_checker_finds_a_cycle_through_a_package_init(tmp_path):
    pkg = _package(tmp_path, {"mid/__init__.py": "from pkg.low import adapter\n",
                              "low/adapter.py": "from pkg.mid.a import x\n"})
    assert cycles(import_graph(pkg), set(module_names(pkg))) == [["pkg.low.adapter", "pkg.mid"]]


def test_checker_allows_an_acyclic_package(tmp_path):
    pkg = _package(tmp_path, {"high.py": "from pkg.mid import a\nimport pkg.low.base\n",
                              "mid/a.py": "from ..low.base import y\n"})
    edges = import_graph(pkg)
    assert {(e.source, e.target) for e in edges} == {("pkg.high", "pkg.mid.a"), ("pkg.high", "pkg.low.base"),
                                                     ("pkg.mid.a", "pkg.low.base")}
    assert cycles(edges, set(module_names(pkg))) == []
    assert layer_violations(edges, LAYERS) == []


@pytest.mark.parametrize("lazy", [False, True])
def test_checker_finds_an_upward_import(tmp_path, lazy):
    code = "def f():\n    import pkg.high\n" if lazy else "import pkg.high\n"
    pkg = _package(tmp_path, {"low/base.py": code})
    bad = layer_violations(import_graph(pkg), LAYERS)
    assert len(bad) == 1 and bad[0].startswith("pkg.low.base:") and "layer 3 ['high']" in bad[0]
    assert ("inside a function" in bad[0]) == lazy


def test_checker_places_a_module_by_its_longest_layer_name():
    assert layer_of("pkg.low.adapter", LAYERS) == 1
    assert layer_of("pkg.low.base", LAYERS) == 0
    assert layer_of("pkg.lower", LAYERS) is None  # a name, not a string prefix
    assert layer_of("pkg", LAYERS) == -1


def test_readme_layer_list_parses():
    text = "x\n<!-- layers: lowest first -->\n1. `a`, `b.c` — what\n2. `d` — more\n<!-- /layers -->\n"
    assert readme_layers(text) == [["a", "b.c"], ["d"]]
    with pytest.raises(AssertionError):
        readme_layers(text.replace("2. `d`", "3. `d`"))
