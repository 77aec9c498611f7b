"""`feedledger serve`: the HTTP API and dashboard over this workspace (server/)."""

from __future__ import annotations

import typer

from feedledger.cli.common import config_path


def serve_cmd(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", help="Port (0: any free port, printed)."),
    token_env: str | None = typer.Option(
        None,
        "--token-env",
        help="Environment variable holding the write tokens: LABEL:TOKEN, comma-separated "
        "(a bare TOKEN is labelled `token`). Unset or empty: read-only.",
    ),
    workers: int = typer.Option(1, "--workers", min=1, help="Worker processes."),
    root_path: str = typer.Option(
        "", "--root-path", help="The path prefix a reverse proxy serves this under."
    ),
    forwarded_allow_ips: str | None = typer.Option(
        None,
        "--forwarded-allow-ips",
        help="Trust X-Forwarded-* headers from these proxy addresses (comma-separated).",
    ),
) -> None:
    """Serve the JSON API (OpenAPI at /docs) and the dashboard. Read-only unless
    --token-env names a variable that is set; SIGTERM shuts down gracefully."""
    from feedledger.server.run import serve  # lazy: the server stack (FastAPI, uvicorn)

    config = config_path(ctx)
    try:
        serve(
            config=str(config) if config else None,
            host=host,
            port=port,
            token_env=token_env,
            workers=workers,
            root_path=root_path,
            forwarded_allow_ips=forwarded_allow_ips,
        )
    except ValueError as exc:  # a malformed token variable (its text is never shown)
        raise typer.BadParameter(f"${token_env}: {exc}", param_hint="--token-env") from None
