"""Pattern cuda-unavailable."""
