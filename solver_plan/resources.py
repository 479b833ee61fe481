"""Where the package's bundled files live: `data/` and `configs/` at the top of a checkout, or
their copies inside an installed package (`solver_plan/_data/`, made by setup.py's build step).

The checkout's folders are the source of truth and stay at the repository's top (the developers'
guide wants them visible there); a non-editable install (`pip install .`) carries copies, so
presets, LLM shapes, PipeDream profiles, pipeline blocks and job files work the same either way.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
INSTALLED_DIR = PACKAGE_DIR / "_data"
BUNDLED = ("data", "configs")  # top-level folders copied into installed packages


def _in_checkout() -> bool:
    return (REPO_ROOT / "pyproject.toml").is_file()


def resource_dir(name: str) -> Path:
    """The bundled folder `name` ("data" or "configs"): the checkout's if this is one, else the
    installed copy. The path is returned even when missing, so messages can name it."""
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled folder {name!r}; expected one of {BUNDLED}")
    checkout = REPO_ROOT / name
    if _in_checkout() and checkout.is_dir():
        return checkout
    installed = INSTALLED_DIR / name
    return installed if installed.is_dir() else checkout


def configs_dir() -> Path:
    """The bundled configs/ folder (`resource_dir`)."""
    return resource_dir("configs")


def cluster_presets_dir() -> Path:
    """The folder of the bundled cluster presets, configs/clusters/."""
    return configs_dir() / "clusters"


def jobs_dir() -> Path:
    """The folder of the bundled batch job files, configs/jobs/."""
    return configs_dir() / "jobs"
