"""Where a repair ends up: reports, diffs and the git branch holding the verified fix."""
