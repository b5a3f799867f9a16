"""One package per chapter: `tasks` (the task functions its sweeps run), `analysis` (frames
and the metrics its claims name) and `figures` (one function per figure)."""
