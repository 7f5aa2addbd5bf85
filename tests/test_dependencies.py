"""The project's dependencies are declared facts (pyproject.toml): every third-party package src/ imports is a
declared runtime dependency, every declared one is used, every package whose private names src/ uses has an upper
bound, and every extra is one the README or CI installs. A check of our own: ``ast``, ``tomllib`` and
``importlib.metadata``, no dependency of its own."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"
PACKAGE = "thinkalike"

#: Declared runtime dependencies that src/ never imports, and what uses them.
USED_WITHOUT_IMPORT = {
    # a Kedro plugin: the `kedro viz` command (README, tests/pipelines/test_viz.py); it reads the datasets' preview()
    "kedro-viz": "the kedro viz command",
    # the Parquet engine under pandas' read_parquet/to_parquet, which kedro-datasets' ParquetDataset (the base of
    # thinkalike.io.atomic.ParquetDataset, conf/base/catalog*.yml) calls
    "pyarrow": "the Parquet engine of the catalog's ParquetDatasets",
}

#: Private names of other packages that src/ uses other than by importing them (attributes, overridden methods),
#: so the import scan below cannot see them: package -> the names, each of which must still occur in src/ (when
#: one no longer does, drop it here and reconsider the package's upper bound in pyproject.toml).
PRIVATE_ATTRIBUTES = {
    "torch": ["_modules", "_forward_hooks", "_backward_hooks"],  # torch.nn.Module's (thinkalike.models)
    "kedro-datasets": ["_save_to_fs", "_fs_open_args_save", "_protocol"],  # the datasets' (thinkalike.io.atomic)
    "kedro": ["_get_save_path", "_get_load_path", "_describe"],  # AbstractVersionedDataset's, documented for authors
    "dask-jobqueue": ["_job_kwargs"],  # a cluster's job options (thinkalike.runners.dask_runner)
}


def normalise(name: str) -> str:
    """PEP 503's normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_parts(requirement: str) -> tuple[str, str]:
    """(normalised name, version specifier) of a PEP 508 requirement, its extras and markers left out."""
    match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?", requirement)
    assert match, requirement
    return normalise(match.group(1)), match.group(3)


def has_upper_bound(specifier: str) -> bool:
    return any(clause.strip().startswith(("<", "==", "~=")) for clause in specifier.split(","))


@cache
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@cache
def declared() -> dict[str, str]:
    """Runtime dependencies: normalised name -> specifier."""
    return dict(requirement_parts(requirement) for requirement in project()["dependencies"])


@cache
def declared_anywhere() -> dict[str, list[str]]:
    """Runtime and optional dependencies: normalised name -> every specifier it is declared with."""
    found: dict[str, list[str]] = {}
    for requirement in [
        *project()["dependencies"],
        *(item for extra in project()["optional-dependencies"].values() for item in extra),
    ]:
        name, specifier = requirement_parts(requirement)
        found.setdefault(name, []).append(specifier)
    return found


def is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


@cache
def imports() -> dict[str, dict[str, list[str]]]:
    """Top-level module -> {"files": files importing it, "private": private names imported from it} for every
    absolute import in src/ (at any depth: inside functions too), the standard library and the project left out."""
    found: dict[str, dict[str, list[str]]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), where)):
            if isinstance(node, ast.Import):
                modules = [(alias.name, [alias.name]) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [(node.module, [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)])]
            else:
                continue
            for module, names in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top == PACKAGE:
                    continue
                entry = found.setdefault(top, {"files": [], "private": []})
                entry["files"].append(where)
                entry["private"] += [f"{name} ({where})" for name in names if any(map(is_private, name.split(".")))]
    return found


@cache
def installed() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions(module: str) -> set[str]:
    """The installed distributions that provide the top-level module (normalised names)."""
    return {normalise(name) for name in installed().get(module, [])}


def catalog_modules() -> set[str]:
    """Top-level modules of the conf/**/catalog*.yml ``type:`` entries, resolved as Kedro does: ``kedro.io.<type>``,
    ``kedro_datasets.<type>``, ``kedro_datasets_experimental.<type>``, then ``<type>`` itself."""
    found = set()
    for path in ROOT.glob("conf/**/catalog*.yml"):
        for entry in (yaml.safe_load(path.read_text()) or {}).values():
            kind = entry.get("type") if isinstance(entry, dict) else None
            if not kind:
                continue
            module = kind.rpartition(".")[0]
            for prefix in ("kedro.io.", "kedro_datasets.", "kedro_datasets_experimental.", ""):
                try:
                    if importlib.util.find_spec(prefix + module) is not None:
                        found.add((prefix + module).split(".")[0])
                        break
                except ModuleNotFoundError:
                    continue
    found.discard(PACKAGE)
    return found


def test_the_scan_sees_the_imports_it_should():
    assert {"kedro", "torch", "sklearn", "huggingface_hub"} <= set(imports())  # top-level and inside functions
    assert "os" not in imports() and PACKAGE not in imports()


def test_every_third_party_package_src_imports_is_a_declared_runtime_dependency():
    undeclared = {}
    for module, entry in sorted(imports().items()):
        candidates = distributions(module)
        assert candidates, f"{module} (imported by {entry['files'][0]}) belongs to no installed distribution"
        if not candidates & set(declared()):
            undeclared[module] = (sorted(candidates), entry["files"][:3])
    assert not undeclared, f"imported by src/ but not in [project].dependencies: {undeclared}"


def test_every_declared_runtime_dependency_is_used():
    used = {name for module in [*imports(), *catalog_modules()] for name in distributions(module)}
    unused = sorted(set(declared()) - used - set(USED_WITHOUT_IMPORT))
    assert not unused, f"declared in [project].dependencies but never imported by src/: {unused}"
    needless = sorted(set(USED_WITHOUT_IMPORT) & used)
    assert not needless, f"imported by src/ after all, take them off USED_WITHOUT_IMPORT: {needless}"
    assert set(USED_WITHOUT_IMPORT) <= set(declared())


def test_every_package_whose_private_names_src_uses_has_an_upper_bound():
    private = {
        name: entry["private"]
        for module, entry in imports().items()
        if entry["private"]
        for name in distributions(module)
    }
    assert "kedro-datasets" in private and "transformer-lens" in private  # kedro_datasets._typing, ..._hf_format
    text = "\n".join(path.read_text() for path in SOURCE.rglob("*.py"))
    for name, attributes in PRIVATE_ATTRIBUTES.items():
        still = [attribute for attribute in attributes if re.search(rf"\b{attribute}\b", text)]
        assert still == attributes, f"{name}: {sorted(set(attributes) - set(still))} no longer used by src/"
        private.setdefault(name, []).extend(attributes)
    unbounded = {
        name: uses
        for name, uses in private.items()
        if name not in declared_anywhere() or not all(map(has_upper_bound, declared_anywhere()[name]))
    }
    assert not unbounded, f"src/ uses private names of these packages, which have no upper bound: {unbounded}"


@pytest.mark.parametrize("extra", sorted(project()["optional-dependencies"]))
def test_every_extra_is_one_the_readme_or_ci_installs(extra):
    instructions = (ROOT / "README.md").read_text() + (ROOT / ".ci" / "run").read_text()
    assert f'.[{extra}]"' in instructions, f"the extra {extra!r} is installed by no README or CI instruction"


def test_the_dev_extra_installs_the_jupyter_the_readme_says_to_start():
    if "start Jupyter" not in (ROOT / "README.md").read_text():
        pytest.skip("the README no longer says to start Jupyter")
    dev = {requirement_parts(requirement)[0] for requirement in project()["optional-dependencies"]["dev"]}
    assert dev & {"jupyter", "jupyterlab", "notebook"} and "ipykernel" in dev, dev
