"""Package discovery that pyproject.toml cannot express: the top-level ``patterns/`` folder
ships as ``repairbot.patterns`` and every pattern folder in it is found without a list."""

from setuptools import find_packages, setup

pattern_packages = [f"repairbot.patterns.{name}" for name in find_packages("patterns")]
pattern_packages = [p for p in pattern_packages if ".cases" not in p]

setup(packages=[*find_packages(".", include=["repairbot", "repairbot.*"]), "repairbot.patterns", *pattern_packages])
