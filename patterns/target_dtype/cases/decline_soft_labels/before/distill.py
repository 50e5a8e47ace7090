import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
images = torch.randn(32, 10)
teacher_probs = torch.softmax(torch.randn(32, 5), dim=1)  # soft labels from a teacher

student = nn.Linear(10, 5)
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)

for epoch in range(3):
    total = 0.0
    for image, probs in zip(images, teacher_probs):
        log_probs = F.log_softmax(student(image), dim=0)
        total = total + F.nll_loss(log_probs, probs)
    optimizer.zero_grad()
    (total / len(images)).backward()
    optimizer.step()
