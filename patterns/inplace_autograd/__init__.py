"""Pattern inplace-autograd."""
