"""search environment family (see its issue); not built yet."""
