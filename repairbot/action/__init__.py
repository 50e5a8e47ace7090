"""The GitHub Action's two stages (``action.yml``, ``.github/examples/``): Stage A analyses the
failed CI job and uploads a patch and reports; Stage B checks the patch and proposes it.

Both scripts need only the standard library (and git); they run by path on a runner before
or without repairbot's own dependencies.
"""
