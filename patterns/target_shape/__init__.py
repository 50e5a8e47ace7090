"""Pattern target-shape."""
