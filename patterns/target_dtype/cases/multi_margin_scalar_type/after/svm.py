"""A linear multi-class SVM trained with the multi-class hinge loss."""
import torch
import torch.nn as tnn

torch.manual_seed(1)
points = torch.randn(90, 2)
labels = (points[:, 0] > 0).float() + (points[:, 1] > 0).float()  # 0, 1 or 2, as floats

svm = tnn.Linear(2, 3)
hinge = tnn.MultiMarginLoss(margin=1.0)
optimizer = torch.optim.SGD(svm.parameters(), lr=0.1, weight_decay=1e-3)


def epoch():
    for i in range(0, 90, 30):
        scores = svm(points[i : i + 30])
        loss = hinge(scores, labels[i : i + 30].long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


for _ in range(10):
    epoch()
