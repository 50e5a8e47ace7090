"""Pattern linear-in-features."""
