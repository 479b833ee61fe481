"""solver-plan: plans for training deep networks on accelerator clusters."""
__version__ = "0.1.0"
