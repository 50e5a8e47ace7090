"""Pattern numpy-grad."""
