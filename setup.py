"""Builds libtollfree.so and the tollfree program with CMake and ships them inside the tollfree
package (pyproject.toml).

The CMake build lives in build-pip/ (kept between installs, so a second install is quick); the
library is copied to tollfree/libtollfree.so, the program to tollfree/bin/tollfree (the
``tollfree`` console script execs it) and the default data to tollfree/data/, where
tollfree._lib and tollfree.data look first."""
import os
import shutil
import subprocess

from setuptools import Distribution, find_packages, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(ROOT, "build-pip")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        cmake = os.path.join(BUILD, "cmake")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", cmake, "-DCMAKE_BUILD_TYPE=Release"],
                              stdout=subprocess.DEVNULL)
        subprocess.check_call(["cmake", "--build", cmake, "--target", "tollfree_shared",
                               "tollfree_cli", "-j", str(os.cpu_count() or 1)])
        pkg = os.path.join(self.build_lib, "tollfree")
        # The real file, not the SONAME symlink chain: ctypes loads it by path.
        shutil.copyfile(os.path.realpath(os.path.join(cmake, "libtollfree.so")),
                        os.path.join(pkg, "libtollfree.so"))
        # The program links the library statically: it runs from anywhere. copy() keeps its mode
        # (the wheel records it, so pip installs it executable).
        os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
        shutil.copy(os.path.join(cmake, "tollfree"), os.path.join(pkg, "bin", "tollfree"))
        os.makedirs(os.path.join(pkg, "data"), exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, "data", "default_close.f64"),
                        os.path.join(pkg, "data", "default_close.f64"))
        # The interactive report's charting library (web/package-lock.json; `make web`), if
        # fetched: without it the installed report says so and static=True still works.
        up = os.path.join(ROOT, "web", "node_modules", "uplot")
        for f in ("dist/uPlot.iife.min.js", "dist/uPlot.min.css", "LICENSE", "package.json"):
            to = os.path.join(pkg, "_vendor", "uplot", f)
            if os.path.isfile(os.path.join(up, f)):
                os.makedirs(os.path.dirname(to), exist_ok=True)
                shutil.copyfile(os.path.join(up, f), to)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # a platform wheel: it carries a shared library
        return True


os.makedirs(BUILD, exist_ok=True)
setup(
    package_dir={"": "python"},
    packages=find_packages("python", include=["tollfree", "tollfree.*"]),
    cmdclass={"build_py": BuildWithLibrary},
    distclass=BinaryDistribution,
    options={"build": {"build_base": BUILD}, "egg_info": {"egg_base": BUILD}},
)
