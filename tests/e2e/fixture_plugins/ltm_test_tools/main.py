"""A fixture plugin for the end-to-end tests: one LLM tool, ``get_weather``,
that always returns the same text, so a test can find that text in the
tool_result event the memory plugin records."""

from astrbot.api.event import AstrMessageEvent, filter
from astrbot.api.star import Context, Star

WEATHER_RESULT = "FIXTURE-WEATHER: sunny, 21 degrees, light breeze"


class LtmTestTools(Star):
    def __init__(self, context: Context) -> None:
        super().__init__(context)

    @filter.llm_tool(name="get_weather")
    async def get_weather(self, event: AstrMessageEvent, city: str) -> str:
        """Get the current weather in a city.

        Args:
            city(string): the city to look up
        """
        return WEATHER_RESULT
