"""A fixture plugin for the end-to-end tests: when an agent run begins (a
user's turn or a cron job's run; the hook the memory plugin injects from)
it logs, as one line of JSON after ``ltm-event-probe: ``, what AstrBot
tells a plugin about the event: its session (umo), platform, sender, group
and text. Tests read it from the AstrBot log (``Bot.event_probes``) to pin
down the values the memory plugin is given on each platform. (A cron run
calls no ``on_llm_request`` hook: only the agent hooks.)"""

import json

from astrbot.api import logger
from astrbot.api.event import AstrMessageEvent, filter
from astrbot.api.star import Context, Star

MARK = "ltm-event-probe: "


class LtmTestEventProbe(Star):
    def __init__(self, context: Context) -> None:
        super().__init__(context)

    @filter.on_agent_begin()
    async def probe(self, event: AstrMessageEvent, run_context) -> None:
        try:
            seen = {
                "event_class": type(event).__name__,
                "unified_msg_origin": event.unified_msg_origin,
                "platform_name": event.get_platform_name(),
                "platform_id": event.get_platform_id(),
                "message_type": str(event.get_message_type().value),
                "session_id": event.get_session_id(),
                "group_id": event.get_group_id(),
                "sender_id": event.get_sender_id(),
                "sender_name": event.get_sender_name(),
                "self_id": event.get_self_id(),
                "is_private_chat": event.is_private_chat(),
                "is_admin": event.is_admin(),
                "message_str": event.message_str,
                "outline": event.get_message_outline(),
            }
            logger.info(MARK + json.dumps(seen, ensure_ascii=False, default=str))
        except Exception as exc:  # a probe never breaks the turn it watches
            logger.warning(f"{MARK}failed: {exc!r}")
