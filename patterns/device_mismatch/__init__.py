"""Pattern device-mismatch."""
