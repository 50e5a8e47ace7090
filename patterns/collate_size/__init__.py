"""Pattern collate-size."""
