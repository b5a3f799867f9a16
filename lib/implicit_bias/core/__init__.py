"""The machinery every chapter shares, in four wings under one facade.

- `engine/`: computes. Tasks, sweeps and the code-aware results cache, code fingerprints,
  kernel pins, the device, paths, datasets, profiles, their overrides and their validation.
- `verdicts/`: decides. Claims as data, the one decision rule, evidence values, registration
  from git, the claims schema.
- `site/`: publishes. Plotting and figure output, figure regression, the website extension,
  its tables, the status page, the Colab copies.
- `tools/`: operates. The runner behind the command line, recompute and verification,
  scaffolding of new chapters, the offline GPU kit.

`chapter.py` is the one facade a notebook uses. The layering runs engine < verdicts < site <
chapter < tools: a module imports only its own wing and the wings below it
(`tests/core/test_layering.py`), and nothing in `core` imports a chapter.
"""
