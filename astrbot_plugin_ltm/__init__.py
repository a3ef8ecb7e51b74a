"""astrbot_plugin_ltm: evidenced, policy-gated long-term memory for AstrBot.

The core in this package imports AstrBot only from :mod:`.adapter`.
"""

from .engine import LTMEngine, ModelGateway
from .scope import Origin, Scope

__all__ = ["LTMEngine", "ModelGateway", "Origin", "Scope"]
__version__ = "0.1.0"
