"""Pattern batchnorm-single-sample."""
