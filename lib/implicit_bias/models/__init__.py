"""Pure numerics, one module per model family: numpy, torch, scipy and cvxpy only (no pandas,
no matplotlib, no profiles, no file I/O), so each can be read and tested on its own."""
