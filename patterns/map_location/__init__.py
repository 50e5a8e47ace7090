"""Pattern map-location."""
