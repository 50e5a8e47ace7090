"""Pattern broadcast-size."""
