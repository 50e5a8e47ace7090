"""Pattern rnn-hidden-shape."""
