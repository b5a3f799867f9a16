"""The tools: what operates. The runner behind `python -m implicit_bias`, the recompute and
verification of committed results, the scaffolding of a new chapter, the offline GPU kit.

The top wing: it may import every other wing and `core.chapter`."""
