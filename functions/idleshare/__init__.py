"""idleshare's Lambda package.

``__version__`` is idleshare's version, written here once: the package metadata (hatchling reads it:
pyproject.toml ``[tool.hatch.version]``), ``idleshare --version`` and the CDK stack's description read it, and
CHANGELOG.md has a section for it (``make release`` checks, then tags ``v<version>``).
"""

__version__ = "0.1.0"
