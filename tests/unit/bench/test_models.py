"""The models gpuprov bench runs on the nodes: published architectures, checked by their size and shapes.

torch is on the nodes, not among gpuprov's dependencies: these tests run where torch is installed (the
CPU wheel: `.venv/bin/pip install torch==2.13.0+cpu`) and are skipped elsewhere. The parameter counts are
also checked, with no torch here, by tests/integration/launch/test_bench.py on a bootstrapped sandbox node.
"""

from __future__ import annotations

import pytest

from gpuprov.bench import options, run
from tests.published_models import IMAGE_SIZE, PUBLISHED_PARAMETERS

torch = pytest.importorskip("torch")
models = pytest.importorskip("gpuprov.onhost.bench_models")
node = pytest.importorskip("gpuprov.onhost.bench_node")


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMETERS))
def test_parameter_count_is_torchvisions_published_figure(name: str) -> None:
    assert models.parameter_count(models.build(name, IMAGE_SIZE)) == PUBLISHED_PARAMETERS[name]


@pytest.mark.parametrize(
    ("name", "image_size"), [("resnet50", 224), ("resnet50", 32), ("vit_b_16", 224), ("vit_b_16", 32)]
)
def test_logits_for_each_image(name: str, image_size: int) -> None:
    model = models.build(name, image_size).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, image_size, image_size))
    assert out.shape == (2, models.NUM_CLASSES)


def test_resnet50_stages_halve_the_image_and_end_at_2048_channels() -> None:
    model = models.ResNet50().eval()
    with torch.no_grad():
        features = model.blocks(model.stem(torch.randn(1, 3, 224, 224)))
    assert features.shape == (1, 2048, 7, 7)  # 224 / 32, as the paper's conv5_x output


def test_vit_b_16_sees_196_patches_and_a_class_token() -> None:
    model = models.VisionTransformer(224)
    assert model.position.shape == (1, 197, 768)
    assert len(model.encoder) == 12


def test_vit_refuses_an_image_that_is_not_whole_patches() -> None:
    with pytest.raises(ValueError, match="multiple of the patch size"):
        models.VisionTransformer(100)


def test_the_cli_knows_the_same_models_and_marker_as_the_node_program() -> None:
    assert set(models.MODELS) == set(options.DEFAULT_BATCH)
    assert node.RESULT_MARKER == run.RESULT_MARKER
    assert set(node.PRECISIONS) == set(options.PRECISIONS)
