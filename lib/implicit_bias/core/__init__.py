"""The machinery every chapter shares: the chapter runner, sweeps and the code-aware results
cache, claims, profiles, device and threads, paths, data, plotting style and figure saving."""
