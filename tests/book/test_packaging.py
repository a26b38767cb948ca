"""The three dependency files agree with each other and with what robattr imports.

requirements.txt     exact pins of everything `make` installs (run time and tests)
environment.yml      the same pins in its pip section
pyproject.toml       the same names, with specifiers that the pins satisfy
requirements-ray.txt the pins of the `ray` extra
requirements-quantus.txt the pins of the `quantus` extra
"""
from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

try:
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
except ImportError:  # pip vendors the same library
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.specifiers import SpecifierSet
    from pip._vendor.packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]

#: Import names that differ from their distribution's name.
IMPORT_TO_DIST = {
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "yaml": "PyYAML",
}
#: Modules that robattr imports from a distribution that a declared dependency requires:
#: {module: (its distribution, the declared dependency that requires it)}.
PROVIDED_BY = {
    "IPython": ("ipython", "ipykernel"),
}
#: Runtime dependencies that robattr runs or loads without importing them by name.
NOT_IMPORTED = {
    "ipykernel": "the kernel papermill executes the notebooks on (kernel_name='python3')",
    "jupyter-book": "robattr build runs its executable",
    "sphinx-exercise": "the Sphinx extension of _config.yml (exercise and solution directives)",
}


def parse_pins(lines) -> dict[str, Requirement]:
    out: dict[str, Requirement] = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name not in out, f"{req.name} is listed twice"
        out[name] = req
    return out


def pin(req: Requirement) -> str:
    """The version of an exact pin ``name==version``."""
    specs = list(req.specifier)
    assert len(specs) == 1 and specs[0].operator == "==", f"{req} is not an exact pin"
    return specs[0].version


def requirements(name: str) -> dict[str, Requirement]:
    return parse_pins((ROOT / name).read_text().splitlines())


def environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def environment_pins() -> dict[str, Requirement]:
    pips = [d["pip"] for d in environment()["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pips) == 1, "environment.yml needs exactly one pip section"
    return parse_pins(pips[0])


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def declared(group: str | None = None) -> dict[str, Requirement]:
    """pyproject's runtime dependencies (group None) or one extra."""
    project = pyproject()
    lines = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return parse_pins(lines)


def test_requirements_txt_pins_every_package_exactly():
    reqs = requirements("requirements.txt")
    assert reqs
    for req in reqs.values():
        pin(req)
        assert not req.marker and not req.extras, f"{req}: keep pins plain"


def test_environment_yml_has_the_same_pins_as_requirements_txt():
    reqs = {n: pin(r) for n, r in requirements("requirements.txt").items()}
    env = {n: pin(r) for n, r in environment_pins().items()}
    assert sorted(env) == sorted(reqs), (
        f"only in environment.yml: {sorted(set(env) - set(reqs))}; "
        f"only in requirements.txt: {sorted(set(reqs) - set(env))}")
    differ = {n: (reqs[n], env[n]) for n in reqs if env[n] != reqs[n]}
    assert not differ, f"pins that differ (requirements.txt, environment.yml): {differ}"


def test_environment_python_satisfies_requires_python():
    pythons = [d for d in environment()["dependencies"]
               if isinstance(d, str) and re.match(r"python\s*=", d)]
    assert len(pythons) == 1
    version = pythons[0].split("=", 1)[1].strip()
    assert SpecifierSet(pyproject()["requires-python"]).contains(version), (
        f"environment.yml's python {version} does not satisfy requires-python "
        f"{pyproject()['requires-python']}")
    assert SpecifierSet(pyproject()["requires-python"]).contains(
        f"{sys.version_info.major}.{sys.version_info.minor}")


@pytest.mark.parametrize("group", [None, "test"])
def test_pyproject_dependencies_are_pinned_in_requirements_txt(group):
    reqs = requirements("requirements.txt")
    for name, req in declared(group).items():
        assert name in reqs, f"{req.name} ({group or 'dependencies'}) is not pinned in requirements.txt"
        version = pin(reqs[name])
        assert req.specifier.contains(version, prereleases=True), (
            f"requirements.txt pins {req.name}=={version}, outside pyproject's {req}")


def test_every_pin_in_requirements_txt_is_declared_in_pyproject():
    names = set(declared()) | set(declared("test"))
    stray = sorted(set(requirements("requirements.txt")) - names)
    assert not stray, f"pinned in requirements.txt but declared nowhere in pyproject: {stray}"


def test_runtime_and_test_dependencies_do_not_overlap():
    both = sorted(set(declared()) & set(declared("test")))
    assert not both, f"declared both as run-time and test dependencies: {both}"


#: The optional extras that `make test` installs from a pin file of their own.
EXTRA_PINS = {"ray": "requirements-ray.txt", "quantus": "requirements-quantus.txt"}


@pytest.mark.parametrize("extra", sorted(EXTRA_PINS))
def test_extra_is_pinned_in_its_requirements_file(extra):
    pin_file = EXTRA_PINS[extra]
    extra_pins = requirements(pin_file)
    declared_extra = declared(extra)
    assert extra in declared_extra
    for name, req in declared_extra.items():
        assert name in extra_pins, f"{req.name} ({extra} extra) is not pinned in {pin_file}"
        version = pin(extra_pins[name])
        assert req.specifier.contains(version, prereleases=True), (
            f"{pin_file} pins {req.name}=={version}, outside pyproject's {req}")
    main = requirements("requirements.txt")
    for name, req in extra_pins.items():
        pin(req)
        if name in main:
            assert pin(main[name]) == pin(req), f"{name} pinned differently in the two files"


@pytest.mark.parametrize("extra", sorted(EXTRA_PINS))
def test_make_test_installs_every_extra_pin_file(extra):
    makefile = (ROOT / "Makefile").read_text()
    assert f"-r {EXTRA_PINS[extra]}" in makefile
    test_line = re.search(r"^test:(.*)$", makefile, flags=re.M)
    assert test_line and extra in test_line.group(1).split(), (
        f"`make test` does not install the {extra} extra")


def imported_modules() -> dict[str, set[str]]:
    """Every top-level module imported anywhere under robattr/ (absolute imports, at any
    depth of the code), mapped to the files that import it."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "robattr").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                out.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return out


def third_party_modules() -> dict[str, set[str]]:
    return {m: files for m, files in imported_modules().items()
            if m not in sys.stdlib_module_names and m != "robattr" and m != "__future__"}


def test_the_import_scan_sees_known_imports():
    mods = third_party_modules()
    assert {"torch", "captum", "seaborn", "papermill", "ray", "quantus"} <= set(mods)
    assert "robattr/attributions/baselines.py" in mods["captum"]   # grad_cam, deeplift


def test_every_third_party_import_is_a_runtime_dependency():
    runtime = declared()
    ray_extra = declared("ray")
    quantus_extra = declared("quantus")
    test_extra = declared("test")
    missing = []
    for module, files in sorted(third_party_modules().items()):
        if module in PROVIDED_BY:
            dist, via = PROVIDED_BY[module]
            if canonicalize_name(via) not in runtime:
                missing.append(f"{module} (needs {via}, which brings {dist}; in {sorted(files)})")
            continue
        dist = canonicalize_name(IMPORT_TO_DIST.get(module, module))
        if dist in runtime:
            continue
        if dist in ray_extra and files == {"robattr/book/executors.py"}:
            continue        # the optional Ray executor imports ray on first use only
        if dist in quantus_extra and files == {"robattr/metrics/quantus_adapter.py"}:
            continue        # the optional Quantus adapter imports quantus on first use only
        if dist in test_extra and files == {"robattr/book/browser_check.py"}:
            continue        # the browser check of a built book, run by the tests
        missing.append(f"{module} (distribution {dist}; in {sorted(files)})")
    assert not missing, "imported by robattr but not in pyproject's dependencies: " + "; ".join(missing)


def test_import_map_matches_the_installed_distributions():
    """IMPORT_TO_DIST and PROVIDED_BY say what the installed packages say."""
    installed = importlib.metadata.packages_distributions()
    for module in third_party_modules():
        if module not in installed:
            continue                  # e.g. ray when it is not installed
        dists = {canonicalize_name(d) for d in installed[module]}
        if module in PROVIDED_BY:
            dist, via = PROVIDED_BY[module]
            assert canonicalize_name(dist) in dists
            requires = importlib.metadata.requires(via) or []
            assert canonicalize_name(dist) in {canonicalize_name(Requirement(r).name)
                                               for r in requires}, f"{via} does not require {dist}"
        else:
            assert canonicalize_name(IMPORT_TO_DIST.get(module, module)) in dists, (
                f"module {module} comes from {sorted(dists)}: add it to IMPORT_TO_DIST")


def test_every_runtime_dependency_is_used():
    imported = {canonicalize_name(IMPORT_TO_DIST.get(m, m)) for m in third_party_modules()}
    for name in declared():
        if name in imported:
            continue
        assert name in NOT_IMPORTED, (
            f"{name} is a run-time dependency that robattr neither imports nor runs")
    config = (ROOT / "_config.yml").read_text()
    assert "sphinx_exercise" in config
    assert "jupyter-book" in (ROOT / "robattr" / "book" / "html.py").read_text()
    assert "kernel_name" in (ROOT / "robattr" / "book" / "execution.py").read_text()


def test_jupyter_book_is_pinned_below_2():
    """jupyter-book 2.x downloads its theme at build time and cannot build offline."""
    req = declared()["jupyter-book"]
    assert not req.specifier.contains("2.0.0")
    assert pin(requirements("requirements.txt")["jupyter-book"]).startswith("1.")


def test_the_version_module_and_pyproject_agree():
    import robattr
    from robattr.version import __version__

    assert pyproject()["version"] == __version__ == robattr.__version__
