"""implicit_bias: the shared library behind the implicit-bias-book chapters."""

__version__ = "0.1.0"

import time as _time

# When this process imported the package: a source file changed after this moment may no longer
# be the code that runs, so code fingerprints refuse it (see `implicit_bias.fingerprint`).
IMPORTED_AT = _time.time()
