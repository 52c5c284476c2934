"""A small CNN for scikit-learn's 8x8 handwritten digits, with named layers.

``conv1 -> relu1 -> conv2 -> relu2 (in-place) -> pool -> fc1 -> relu3 -> fc2``. The outputs of
``relu1`` (16x8x8), ``relu2`` (32x8x8), ``pool`` (32x4x4) and ``relu3`` (64) are the tensors of
the shipped ``digits_cnn`` density profile, under the names the ``digits_cnn`` network definition
gives them (``PROFILE_TENSORS``), so the simulator can use the profile as it is.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["DigitsCNN", "PROFILE_TENSORS"]

PROFILE_TENSORS: dict[str, str] = {"relu1": "conv1", "relu2": "conv2", "pool": "pool",
                                   "relu3": "fc1"}
"""Hooked module -> the tensor it produces in ``workloads/networks/digits_cnn.yaml`` (a ReLU
works in place there, so its output keeps the name of the layer before it), in forward order."""


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions, a 2x2 max-pool and two fully connected layers (10 classes).

    Inputs are ``N x 1 x 8 x 8`` images scaled to [0, 1]. ``relu2`` is in-place on purpose, so
    the capture path for in-place ReLUs is exercised on real data.
    """

    def __init__(self, channels: tuple[int, int] = (16, 32), hidden: int = 64) -> None:
        super().__init__()
        c1, c2 = channels
        self.conv1 = nn.Conv2d(1, c1, kernel_size=3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c1, c2, kernel_size=3, padding=1)
        self.relu2 = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(c2 * 4 * 4, hidden)
        self.relu3 = nn.ReLU()
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits for a batch of 8x8 images."""
        x = self.pool(self.relu2(self.conv2(self.relu1(self.conv1(x)))))
        return self.fc2(self.relu3(self.fc1(torch.flatten(x, 1))))
