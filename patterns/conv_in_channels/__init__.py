"""Pattern conv-in-channels."""
