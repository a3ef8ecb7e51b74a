"""The plugin's logger.

A child of AstrBot's ``astrbot`` logger, so background warnings reach
AstrBot's console, log file and WebUI log: AstrBot removes the root
logger's handlers when it loads plugins, which silences a plain
module-level logger. Outside AstrBot it behaves like any other logger.
"""

import logging

log = logging.getLogger("astrbot.plugin.astrbot_plugin_ltm")
