"""``python -m repairbot``."""

from repairbot.cli import main

main()
