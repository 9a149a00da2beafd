"""The build steps pyproject.toml cannot express: the packaged schemas and environments."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithSchemas(build_py):
    """Copies schemas/ into the package (rdss/_schemas) so an installed wheel carries them, and
    cdk.json (rdss/_cdk.json) so `rdss bench cost --env ENV` prices the environments it defines."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            shutil.copytree("schemas", Path(self.build_lib, "rdss", "_schemas"), dirs_exist_ok=True)
            shutil.copyfile("cdk.json", Path(self.build_lib, "rdss", "_cdk.json"))


setup(cmdclass={"build_py": BuildWithSchemas})
