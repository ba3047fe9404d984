"""The wheel's packages, found rather than listed (the rest of the build configuration is in pyproject.toml): every
package under zoo/, and recipes/ as zoo._recipes (mapped there)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["zoo", "zoo.*"]), "zoo._recipes"])
