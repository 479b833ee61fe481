"""Build hook: copy the top-level data/ and configs/ folders into the built package.

Everything else is in pyproject.toml. The folders stay at the repository's top (where the guide
wants them); a wheel carries them as solver_plan/_data/{data,configs}, which
`solver_plan.resources` finds when the package is not run from a checkout.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED = ("data", "configs")  # keep in step with solver_plan.resources.BUNDLED
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildWithData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout's folders directly
        for name in BUNDLED:
            source = ROOT / name
            if source.is_dir():
                target = Path(self.build_lib) / "solver_plan" / "_data" / name
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(source, target, ignore=SKIPPED)


setup(cmdclass={"build_py": BuildWithData})
