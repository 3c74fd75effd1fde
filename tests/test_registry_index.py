"""Lazy registries and lazy model libraries: the index is true, a lookup loads exactly its module, and a
config validates without torch.

The index (``rlvr/registry_index.py``) is regenerated with ``python -m rlvr.cli.docs README.md``.
"""

import json
import subprocess
import sys

import pytest

import rlvr.registry_index as index
from rlvr.cli.docs import registry_homes, render_homes
from rlvr.lazy import LazyModule
from rlvr.registry import REGISTRIES, Registry, RegistryError

HEAVY = ("torch", "transformers", "numpy", "scipy", "sympy", "matplotlib")


def fresh(code: str) -> dict:
    """Run ``code`` in a new interpreter; it assigns ``out`` (JSON), which comes back."""
    src = f"import json, sys\n{code}\nprint(json.dumps(out))"
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_index_names_every_component_of_every_registry_and_its_module():
    homes = registry_homes()
    assert homes == index.HOMES, "run: python -m rlvr.cli.docs README.md"
    text = open(index.__file__).read()
    assert render_homes(homes) in text
    # each home really is where the component's function lives or registers, and every registry with
    # built-in components is indexed
    for kind, names in homes.items():
        for name, module in names.items():
            assert REGISTRIES[kind].get(name).module == module
    assert {"advantage estimator", "policy objective", "verifier", "task", "rollout engine"} <= set(homes)


def test_a_lookup_imports_only_the_module_that_registers_the_name():
    out = fresh("""
from rlvr.algorithms.registry import ADVANTAGES
before = "rlvr.algorithms.advantages.rloo" in sys.modules
names = ADVANTAGES.names()
listed = "rlvr.algorithms.advantages.rloo" in sys.modules
entry = ADVANTAGES.get("rloo")
out = {"before": before, "listed": listed, "after": "rlvr.algorithms.advantages.rloo" in sys.modules,
       "names": names, "fn": entry.fn.__module__, "contains": "rloo" in ADVANTAGES and "nope" not in ADVANTAGES,
       "others": sorted(m for m in sys.modules if m.startswith("rlvr.algorithms.advantages.")),
       "heavy": [m for m in %r if m in sys.modules]}
""" % (HEAVY,))
    assert not out["before"] and not out["listed"] and out["after"]
    assert {"grpo", "rloo", "dr_grpo", "vimpo"} <= set(out["names"]) and out["contains"]
    assert out["fn"] == "rlvr.algorithms.advantages.rloo"
    assert out["others"] == ["rlvr.algorithms.advantages.rloo"]
    assert out["heavy"] == []  # registering a component does not need torch; running it does


def test_every_recipe_validates_without_a_model_library():
    out = fresh("""
from rlvr.config.run import load_config
from rlvr.config.recipes import recipe_names
names = recipe_names()
for n in names:
    load_config(recipe=n)
out = {"n": len(names), "heavy": [m for m in %r if m in sys.modules]}
""" % (HEAVY,))
    assert out["n"] >= 60 and out["heavy"] == []


def test_a_stale_index_entry_is_a_clear_error():
    reg = Registry("stale-index test widget")
    reg._homes["ghost"] = "rlvr.core.types"  # a real module that registers no widget
    assert "ghost" in reg and reg.names() == ["ghost"]
    with pytest.raises(RegistryError, match="rlvr.core.types.*did not register.*python -m rlvr.cli.docs"):
        reg.get("ghost")
    with pytest.raises(RegistryError, match="unknown stale-index test widget 'nope'; valid names"):
        reg.get("nope")


def test_a_registration_records_its_module_and_unregister_forgets_the_index_entry():
    reg = Registry("module-recording test widget")
    reg.register("w")(lambda: None)
    assert reg.get("w").module == __name__
    reg._homes["lazy_one"] = "rlvr.core.types"
    reg.unregister("w")
    assert reg.names() == ["lazy_one"]


def test_lazy_module_imports_on_first_read_and_rebinds_rlvr_modules():
    out = fresh("""
import types
from rlvr.lazy import LazyModule
probe = types.ModuleType("rlvr._lazy_probe")
sys.modules["rlvr._lazy_probe"] = probe
stand_in = LazyModule("colorsys")
probe.cs = stand_in
before = "colorsys" in sys.modules
has_path = hasattr(stand_in, "__path__")  # introspection does not import
still = "colorsys" in sys.modules
value = stand_in.rgb_to_hsv(1.0, 0.0, 0.0)
import colorsys
out = {"before": before, "has_path": has_path, "still": still, "value": list(value),
       "rebound": probe.cs is colorsys, "forwards": stand_in.hsv_to_rgb is colorsys.hsv_to_rgb,
       "repr": repr(stand_in)}
""")
    assert not out["before"] and not out["has_path"] and not out["still"]
    assert out["value"] == [0.0, 1.0, 1.0]
    assert out["rebound"] and out["forwards"] and "loaded" in out["repr"]


def test_lazy_module_raises_attribute_error_for_missing_names():
    stand_in = LazyModule("colorsys")
    with pytest.raises(AttributeError):
        stand_in.no_such_function


def test_concurrent_first_lookups_of_one_component_all_succeed():
    out = fresh("""
import importlib, threading, time
import rlvr.registry
from rlvr.algorithms.registry import OBJECTIVES
real = importlib.import_module
def slow_import(name, *a):  # a module that takes a while to import, so the lookups overlap
    time.sleep(0.2)
    return real(name, *a)
rlvr.registry.importlib = type("M", (), {"import_module": staticmethod(slow_import)})
results, errors = [], []
def look():
    try:
        results.append(OBJECTIVES.get("cispo").fn.__module__)
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=look) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
out = {"results": results, "errors": errors}
""")
    assert out["errors"] == [] and out["results"] == ["rlvr.algorithms.objectives.cispo"] * 8
