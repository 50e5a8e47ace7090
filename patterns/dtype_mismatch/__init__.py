"""Pattern dtype-mismatch."""
