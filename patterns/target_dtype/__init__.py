"""Pattern target-dtype."""
