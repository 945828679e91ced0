"""The training chain's AdamW: torch's AdamW arithmetic and state layout, without torch._dynamo."""

import json
import subprocess
import sys

import pytest
import torch

from lostmid.core.model import FlagTransformer
from lostmid.core.optim import AdamW

from conftest import model_config, tiny_spec

HYPER = {"lr": 3e-3, "betas": (0.9, 0.99), "weight_decay": 0.01}


def twin_models():
    torch.manual_seed(0)
    first = FlagTransformer(model_config(seq_len=8, depth=1, d_model=8, heads=2, mlp_ratio=2))
    second = FlagTransformer(first.config)
    second.load_state_dict(first.state_dict())
    return first, second


def train(model, optimizer, steps, generator=None):
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    for _ in range(steps):
        tokens = torch.randint(0, 2, (16, 8), generator=generator)
        optimizer.zero_grad(set_to_none=True)
        model(tokens).square().mean().backward()
        optimizer.step()


def assert_same_parameters(a, b):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), name


def test_the_update_is_bitwise_torch_adamw_with_the_same_kernel():
    ours, theirs = twin_models()
    optimizer = AdamW(ours.parameters(), **HYPER)
    train(ours, optimizer, 6)
    train(theirs, torch.optim.AdamW(theirs.parameters(), **HYPER, fused=optimizer.fused), 6)
    assert_same_parameters(ours, theirs)


def test_a_gradient_in_another_memory_layout_updates_the_right_elements():
    # vmap returns some gradients transposed in memory; the fused kernel reads raw strides.
    ours, reference = twin_models()
    for model, layout in ((ours, lambda g: g.t().contiguous().t()), (reference, lambda g: g)):
        optimizer = AdamW(model.parameters(), **HYPER)
        model(torch.randint(0, 2, (16, 8), generator=torch.Generator().manual_seed(0))).square().mean().backward()
        for p in model.parameters():
            p.grad = layout(p.grad) if p.dim() == 2 else p.grad
        optimizer.step()
    assert_same_parameters(ours, reference)


@pytest.mark.parametrize("first, second", [(AdamW, torch.optim.AdamW), (torch.optim.AdamW, AdamW)])
def test_either_class_resumes_the_others_state_dict_exactly(first, second):
    def build(cls, model):
        return cls(model.parameters(), **HYPER, **({"fused": True} if cls is torch.optim.AdamW else {}))

    whole, resumed = twin_models()
    train(whole, build(AdamW, whole), 6)

    batches = torch.Generator().manual_seed(0)
    first_half = build(first, resumed)
    train(resumed, first_half, 3, batches)
    second_half = build(second, resumed)
    second_half.load_state_dict(first_half.state_dict())
    train(resumed, second_half, 3, batches)
    assert_same_parameters(resumed, whole)


def test_a_state_dict_for_another_model_is_refused_with_the_shapes():
    model, _ = twin_models()
    optimizer = AdamW(model.parameters(), **HYPER)
    train(model, optimizer, 1)
    other = FlagTransformer(model_config(seq_len=8, depth=1, d_model=16, heads=2, mlp_ratio=2))
    with pytest.raises(ValueError, match="shape"):
        AdamW(other.parameters(), **HYPER).load_state_dict(optimizer.state_dict())
    deeper = FlagTransformer(model_config(seq_len=8, depth=2, d_model=8, heads=2, mlp_ratio=2))
    with pytest.raises(ValueError, match="parameters"):
        AdamW(deeper.parameters(), **HYPER).load_state_dict(optimizer.state_dict())


def test_a_training_segment_never_imports_torch_dynamo_and_a_figure_never_imports_torch(tmp_path):
    # The imports are a third of a short job's CPU (docs/performance.md); this guards them.
    spec = json.dumps(tiny_spec())
    script = f"""
import sys
from lostmid.cli.main import main
assert main(["init", "--spec", {spec!r}, "--device", "cpu", "--out", {str(tmp_path / "s0.pt")!r}]) == 0
assert main(["train", "--spec", {spec!r}, "--device", "cpu", "--threads", "1",
             "--checkpoint", {str(tmp_path / "s0.pt")!r}, "--steps", "3", "--out", {str(tmp_path / "s3.pt")!r},
             "--table", {str(tmp_path / "log.parquet")!r}]) == 0
print(sorted(m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr

    figure = f"""
import sys
import pandas as pd
from lostmid.cli.main import main
table = {{"variant": ["baseline"], "L": [8], "depth": [1], "seed": [0], "step": [1], "loss": [0.7], "accuracy": [0.5],
         "seconds_per_step": [0.01], "peak_mem_mb": [100.0]}}
pd.DataFrame(table).to_parquet({str(tmp_path / "t.parquet")!r})
assert main(["figures", "--threads", "1", "--train", {str(tmp_path / "t.parquet")!r}, "--figures", "training_curves",
             "--out-dir", {str(tmp_path)!r}]) == 0
print("torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", figure], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
