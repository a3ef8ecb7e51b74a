"""astrbot_plugin_ltm: evidenced, policy-gated long-term memory for AstrBot
(docs/architecture.md); ``engine.py`` composes the parts, only ``adapter.py`` imports AstrBot.
"""

from .engine import LTMEngine
from .extension_points import ModelGateway
from .scope import Origin, Scope

__all__ = ["LTMEngine", "ModelGateway", "Origin", "Scope"]
__version__ = "0.1.0"
