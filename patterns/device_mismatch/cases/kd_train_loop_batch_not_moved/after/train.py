# Trimmed from Joyful-Buffalo/simplest-knowledge-distillation vanilla_kd_run.py and
# simplest_models/teachers.py (MIT License): step 1 (train the teacher) only; seeded random
# digits stand in for torchvision's MNIST.
import torch
from torch import nn
from torch.nn import functional as F


class Teacher(nn.Module):
    def __init__(self):
        super(Teacher, self).__init__()
        self.conv1 = nn.Conv2d(1, 40, kernel_size=5)
        self.bn1 = nn.BatchNorm2d(40)
        self.conv2 = nn.Conv2d(40, 40, kernel_size=5)
        self.fc1 = nn.Linear(40 * 4 * 4, 20)
        self.fc2 = nn.Linear(20, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x, inplace=True)
        x = F.max_pool2d(x, 2, 2)
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2, 2)
        x = x.view(-1, 40 * 4 * 4)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return x


def mnist_load_data(g):
    train_dataset = torch.utils.data.TensorDataset(torch.rand(64, 1, 28, 28, generator=g), torch.randint(0, 10, (64,), generator=g))
    test_dataset = torch.utils.data.TensorDataset(torch.rand(32, 1, 28, 28, generator=g), torch.randint(0, 10, (32,), generator=g))
    train_loader = torch.utils.data.DataLoader(dataset=train_dataset, batch_size=16, shuffle=True, generator=g)
    test_loader = torch.utils.data.DataLoader(dataset=test_dataset, batch_size=16, shuffle=False)
    return train_loader, test_loader


def train_model(train_dataloader, model, criterion, optimizer, device):
    model.train()
    for images, labels in train_dataloader:
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        outputs = model(images)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()


def test_model(model, test_dataloader, device):
    model.eval()
    acc = 0
    total = 0
    with torch.no_grad():
        for i, (images, labels) in enumerate(test_dataloader):
            images, labels = images.to(device), labels.to(device)
            outputs = model(images)
            predicted = outputs.argmax(1)
            total += labels.size(0)
            correct = (predicted == labels).sum().item()
            acc += correct
    model_name = type(model).__name__
    print(f'Accuracy of the {model_name} on the test images {acc / total * 100:.2f}')
    model.train()
    return acc / total * 100


def train_main(train_dataloader, test_dataloader, teacher_model, device):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(teacher_model.parameters(), lr=0.01, betas=(0.9, 0.999))
    max_acc = 0
    for epoch in range(2):
        train_model(train_dataloader, teacher_model, criterion, optimizer, device)
        acc = test_model(teacher_model, test_dataloader, device)
        if acc > max_acc:
            max_acc = acc
    return max_acc


def main():
    g = torch.Generator().manual_seed(2025)
    train_dataloader, test_dataloader = mnist_load_data(g)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'

    print('step 1: Train Teacher')
    teacher = Teacher().to(device)
    teacher_acc = train_main(train_dataloader, test_dataloader, teacher, device)
    print(f'Accuracy of the Teacher model on the test images: {teacher_acc:.2f}')


if __name__ == '__main__':
    main()
