"""Pattern conv-input-rank."""
