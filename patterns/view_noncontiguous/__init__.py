"""Pattern view-noncontiguous."""
