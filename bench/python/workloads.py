"""Training workloads shared by the Python benchmarks (framework-neutral:
plain torch modules, no distributed library imported here).

- mlp: the seed script's model (784-128-10), batch 32, Adam: latency-bound,
  about 0.4 MB of gradients in 4 tensors.
- bandwidth: ten 2048x2048 linear layers (168 MB of float32 gradients in 20
  tensors), batch 8, SGD: the step is dominated by moving gradients.
- resnet: 161 parameters with ResNet-50's shapes (97.5 MiB, the shapes of
  bench/resnet50_shapes.h), a synthetic backward that gives each a gradient
  from the last layer to the first, SGD.
- mobilenet: torchvision's mobilenet_v3_small (2.5M parameters, 9.7 MB of
  gradients in 142 tensors) on random 224x224 images, batch 4, SGD: the step
  of Horovod's pytorch_synthetic_benchmark.py with a model small enough for
  2 cores, so DDP runs it too (needs torchvision).

Each builder returns (module, optimizer, step_inputs) where the module's
forward(*step_inputs) returns the loss; the model is seeded so that every
rank starts from the same weights.
"""

import torch


def resnet50_shapes():
    shapes = [(64, 3, 7, 7), (64,), (64,)]
    inplanes = 64
    for planes, blocks in zip((64, 128, 256, 512), (3, 4, 6, 3)):
        for b in range(blocks):
            shapes += [
                (planes, inplanes, 1, 1),
                (planes,),
                (planes,),
                (planes, planes, 3, 3),
                (planes,),
                (planes,),
                (planes * 4, planes, 1, 1),
                (planes * 4,),
                (planes * 4,),
            ]
            if b == 0:
                shapes += [(planes * 4, inplanes, 1, 1), (planes * 4,), (planes * 4,)]
            inplanes = planes * 4
    return shapes + [(1000, 2048), (1000,)]


class _Classifier(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.net(x), y)


class _ShapesOnly(torch.nn.Module):
    """Parameters of the given shapes; the loss touches each once, the last
    first, so backward hooks fire in a network's order."""

    def __init__(self, shapes):
        super().__init__()
        self.params = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(s)) for s in shapes)

    def forward(self, coeff):
        return sum((p * c).sum() for p, c in zip(reversed(self.params), reversed(coeff)))


def build(name, rank):
    torch.manual_seed(0)
    if name == "mlp":
        model = _Classifier(
            torch.nn.Sequential(
                torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
            )
        )
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        return model, opt, (torch.randn(32, 784), torch.randint(0, 10, (32,)))
    if name == "bandwidth":
        layers = []
        for _ in range(10):
            layers += [torch.nn.Linear(2048, 2048), torch.nn.ReLU()]
        model = _Classifier(torch.nn.Sequential(*layers))
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        return model, opt, (torch.randn(8, 2048), torch.randint(0, 2048, (8,)))
    if name == "resnet":
        shapes = resnet50_shapes()
        model = _ShapesOnly(shapes)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        coeff = [torch.full(s, 1e-3 * (rank + 1)) for s in shapes]
        return model, opt, (coeff,)
    if name == "mobilenet":
        from torchvision import models

        model = _Classifier(models.mobilenet_v3_small())
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        return model, opt, (torch.randn(4, 3, 224, 224), torch.randint(0, 1000, (4,)))
    raise ValueError(f"unknown workload {name!r}")


def gradient_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())
