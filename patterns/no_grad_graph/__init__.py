"""Pattern no-grad-graph."""
