"""The plugin's logger: a child of AstrBot's ``astrbot`` logger, as AstrBot removes
the root logger's handlers when it loads plugins, silencing a plain one.
"""

import logging

log = logging.getLogger("astrbot.plugin.astrbot_plugin_ltm")
PARENT = "astrbot"
MARK = "_ltm_parent_fields"  # our filter, whichever import of this module added it


class _ParentFields(logging.Filter):
    """AstrBot before 4.29 adds its format's fields in a filter a child's records never
    pass ("Formatting field not found"): run those filters on ours unless we have our own."""

    _ltm_parent_fields = True

    def filter(self, record: logging.LogRecord) -> bool:
        if any(not getattr(f, MARK, False) for f in log.filters):
            return True
        for parent_filter in logging.getLogger(PARENT).filters:
            if isinstance(parent_filter, logging.Filter):
                parent_filter.filter(record)
            elif callable(parent_filter):
                parent_filter(record)
        return True  # the fields are added; whether to emit stays ours


# A reload imports this module again onto the same logger: the old filter is replaced, not joined.
for _previous in [f for f in log.filters if getattr(f, MARK, False)]:
    log.removeFilter(_previous)
log.addFilter(_ParentFields())
