"""The `forkflow` command line: Typer commands that parse, call one core function and render."""
