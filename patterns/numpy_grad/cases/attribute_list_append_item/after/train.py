import numpy as np
import torch
import torch.nn as nn


class DeepQNetwork:
    def __init__(self, n_actions, n_features, lr=0.01):
        self.net = nn.Sequential(nn.Linear(n_features, 10), nn.ReLU(), nn.Linear(10, n_actions))
        self.optimizer = torch.optim.RMSprop(self.net.parameters(), lr=lr)
        self.loss_func = nn.MSELoss()
        self.cost_his = []

    def learn(self, s, q_target):
        q_eval = self.net(s)
        loss = self.loss_func(q_eval, q_target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.cost_his.append(loss.item())

    def plot_cost(self):
        costs = np.array(self.cost_his)
        print("mean cost", costs.mean())


dqn = DeepQNetwork(2, 4)
for step in range(30):
    s = torch.randn(8, 4)
    dqn.learn(s, torch.randn(8, 2))
dqn.plot_cost()
