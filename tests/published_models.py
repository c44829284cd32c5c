"""Published parameter counts of the models gpuprov bench builds, in one place for the unit test (where torch
is installed here) and the integration test (the torch of a bootstrapped sandbox node).

torchvision's num_params, from each builder's weights metadata as its documentation page shows it:
- resnet50 (ResNet50_Weights.IMAGENET1K_V1, num_params 25557032):
  https://pytorch.org/vision/stable/models/generated/torchvision.models.resnet50.html
- vit_b_16 (ViT_B_16_Weights.IMAGENET1K_V1, num_params 86567656):
  https://pytorch.org/vision/stable/models/generated/torchvision.models.vit_b_16.html
Both at 224 px with 1000 classes, the size gpuprov.onhost.bench_models builds for the comparison.
"""

from __future__ import annotations

PUBLISHED_PARAMETERS = {"resnet50": 25_557_032, "vit_b_16": 86_567_656}
IMAGE_SIZE = 224
