"""The site: what publishes. The pinned plotting style and figure saving, figure regression
and its report, the website build extension and its tables, the status page, the Colab copies
of the chapters, the public repository's address and what links to it.

Imports the engine and the verdicts; nothing from `tools` or `chapter`."""
