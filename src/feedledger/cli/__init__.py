"""Command-line entry point (Typer + Rich). Thin: parse, call a pipeline function, render."""
