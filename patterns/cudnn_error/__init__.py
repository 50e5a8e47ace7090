"""Pattern cudnn-error."""
