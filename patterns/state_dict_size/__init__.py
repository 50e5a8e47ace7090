"""Pattern state-dict-size."""
