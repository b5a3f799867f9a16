"""The engine: what computes. Tasks and their declaration, sweeps and the code-aware results
cache, code fingerprints, the pinned BLAS kernels, the device, paths, datasets, profiles, their
overrides (`--set`, profile files) and their schema validation.

The lowest wing: it imports nothing from `verdicts`, `site`, `tools` or `chapter`."""
