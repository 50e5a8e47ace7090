"""Pattern embedding-index."""
