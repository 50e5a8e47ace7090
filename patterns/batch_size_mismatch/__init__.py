"""Pattern batch-size-mismatch."""
