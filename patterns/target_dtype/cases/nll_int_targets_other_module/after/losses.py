import torch.nn.functional as F


def classification_loss(log_probs, targets, weight=None):
    """Mean negative log-likelihood of the true classes."""
    return F.nll_loss(log_probs, targets.long(), weight=weight)
