"""Pattern backward-twice."""
