"""Tool-use environment family (ToolUse-v0): JSON tool calls over stateful personal apps
(contacts, calendar, email, files, bank, shopping list), graded on the final app state."""
