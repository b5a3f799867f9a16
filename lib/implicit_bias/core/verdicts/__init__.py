"""The verdicts: what decides. Claims as data, the book's one decision rule, evidence values
that carry how many runs were dropped, the claims' registration from git history, and the
claims schema.

Imports the engine only; nothing from `site`, `tools` or `chapter`."""
