"""Pattern weights-only."""
