"""astrbot_plugin_ltm: evidenced, policy-gated long-term memory for AstrBot.

The package is laid out by what each part does (docs/architecture.md):
``recording/`` (the hooks' hot path), ``learning/`` (extraction, merge,
policy, writing), ``storing/`` (SQLite, the single write point and its
change channel), ``indexes/`` (keyword and vector namespaces derived from
SQLite), ``recalling/`` (the read path and its budget) and ``operating/``
(commands, the dashboard API, review, export). ``engine.py`` composes them;
only ``adapter.py`` imports AstrBot.
"""

from .engine import LTMEngine
from .extension_points import ModelGateway
from .scope import Origin, Scope

__all__ = ["LTMEngine", "ModelGateway", "Origin", "Scope"]
__version__ = "0.1.0"
