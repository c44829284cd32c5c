"""gpuprov: provision GPU servers for distributed PyTorch training, then launch jobs on them."""

__version__ = "0.1.0"
