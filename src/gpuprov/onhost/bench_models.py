"""ResNet-50 and ViT-B/16 written with torch alone, for `gpuprov bench` (this file is pushed to the nodes).

The nodes have the env the python_env role built (torch, no torchvision), so the models are defined here at
their published architectures, the same layer shapes as torchvision's builders:

- resnet50: ResNet-50 v1.5 (He et al., arXiv:1512.03385; the stride-2 of a downsampling block in the 3x3
  convolution, as torchvision and NVIDIA's Deep Learning Examples do). torchvision publishes
  num_params 25557032 for it: https://pytorch.org/vision/stable/models/generated/torchvision.models.resnet50.html
- vit_b_16: ViT-Base, 16x16 patches (Dosovitskiy et al., arXiv:2010.11929): 12 layers, width 768, 12 heads,
  MLP 3072, class token, learned position embedding. torchvision publishes num_params 86567656 at 224x224:
  https://pytorch.org/vision/stable/models/generated/torchvision.models.vit_b_16.html

Only the architecture matters for a throughput benchmark: weights start random.
"""

from __future__ import annotations

from collections.abc import Callable

import torch  # type: ignore[import-not-found]
from torch import nn

NUM_CLASSES = 1000


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (has the stride: v1.5), 1x1 expand x4; a projection shortcut where shapes differ."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.shortcut(x))


class ResNet50(nn.Module):
    # Blocks per stage and the stages' bottleneck widths (the paper's Table 1, 50-layer column).
    STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))

    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        blocks: list[nn.Module] = []
        channels = 64
        for index, (count, width) in enumerate(self.STAGES):
            for block in range(count):
                stride = 2 if index > 0 and block == 0 else 1
                blocks.append(Bottleneck(channels, width, stride))
                channels = width * Bottleneck.expansion
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


class EncoderBlock(nn.Module):
    """Pre-norm transformer block: x + attention(LN(x)), then x + MLP(LN(x)) with GELU."""

    def __init__(self, width: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width, eps=1e-6)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(width, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(width, mlp), nn.GELU(), nn.Linear(mlp, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class VisionTransformer(nn.Module):
    def __init__(
        self,
        image_size: int = 224,
        patch: int = 16,
        layers: int = 12,
        width: int = 768,
        heads: int = 12,
        mlp: int = 3072,
        num_classes: int = NUM_CLASSES,
    ) -> None:
        super().__init__()
        if image_size % patch:
            raise ValueError(f"image size {image_size} is not a multiple of the patch size {patch}")
        tokens = (image_size // patch) ** 2 + 1  # the patches and the class token
        self.patch_embedding = nn.Conv2d(3, width, patch, stride=patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, width))
        self.position = nn.Parameter(torch.empty(1, tokens, width).normal_(std=0.02))
        self.encoder = nn.Sequential(*(EncoderBlock(width, heads, mlp) for _ in range(layers)))
        self.ln = nn.LayerNorm(width, eps=1e-6)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embedding(x).flatten(2).transpose(1, 2)  # (batch, patches, width)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.position
        x = self.ln(self.encoder(x))
        return self.head(x[:, 0])


# name -> (builder taking the image size, is it a CNN (channels_last helps), the smallest image it takes)
MODELS: dict[str, tuple[Callable[[int], nn.Module], bool, int]] = {
    "resnet50": (lambda image_size: ResNet50(), True, 32),
    "vit_b_16": (lambda image_size: VisionTransformer(image_size), False, 16),
}


def build(name: str, image_size: int) -> nn.Module:
    return MODELS[name][0](image_size)


def is_cnn(name: str) -> bool:
    return MODELS[name][1]


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
