"""Pattern cuda-oom."""
