"""A tiny MCP server for the tour notebook (built with the ``mcp`` SDK; runs over stdio)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather")

FORECASTS = {"paris": "sunny, 21 °C", "oslo": "snow, -3 °C"}


@server.tool()
def forecast(city: str) -> str:
    """Tomorrow's forecast for a city."""
    return FORECASTS.get(city.lower(), "unknown city")


@server.tool()
def convert_c_to_f(celsius: float) -> float:
    """Convert degrees Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


if __name__ == "__main__":
    server.run("stdio")
