"""``repairbot server``: the lint findings as LSP diagnostics and code actions, over stdio.

pygls and lsprotocol are an optional extra; ``convert`` maps the engine's findings and fixed
text to LSP values, ``lsp`` is the pygls server.
"""

from __future__ import annotations

from repairbot.types import BadInput

EXTRA_MISSING = "repairbot server needs pygls and lsprotocol: pip install 'repairbot[server]'"


def serve() -> None:
    """Speak LSP over stdin/stdout until the client exits; BadInput when pygls is missing."""
    try:
        from repairbot.server.lsp import build_server
    except ImportError:
        raise BadInput(EXTRA_MISSING) from None
    build_server().start_io()
