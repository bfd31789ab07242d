"""The NVML binding in the environment is NVIDIA's nvidia-ml-py, within the tested range.

The ``pynvml`` PyPI distribution is a deprecated shim: since 13.0.1 it installs a .pth
import hook that warns on ``import pynvml``, which breaks a warnings-as-errors suite and
hides which binding is really in use. It must never be installed, even transitively.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _declared(name: str) -> Requirement:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    [requirement] = [r for r in map(Requirement, dependencies) if r.name == name]
    return requirement


def test_the_deprecated_pynvml_distribution_is_not_installed() -> None:
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.distribution("pynvml")


def test_pynvml_is_not_declared_as_a_dependency() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert not [d for d in dependencies if Requirement(d).name == "pynvml"]


def test_nvidia_ml_py_is_installed_within_the_pinned_range() -> None:
    requirement = _declared("nvidia-ml-py")
    assert requirement.specifier, "nvidia-ml-py must be pinned: tests use private seams"
    installed = Version(metadata.version("nvidia-ml-py"))
    assert requirement.specifier.contains(installed), (
        f"nvidia-ml-py {installed} is outside {requirement.specifier}"
    )


def test_import_pynvml_resolves_to_nvidia_ml_py() -> None:
    import pynvml

    files = metadata.distribution("nvidia-ml-py").files or []
    [module] = [f for f in files if str(f) == "pynvml.py"]
    assert Path(str(module.locate())).resolve() == Path(pynvml.__file__).resolve()
