"""Pattern state-dict-keys."""
