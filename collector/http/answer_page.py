"""The console's confirm page for signed links (``/ui/answer``): GET shows, POST acts.

Server-rendered and self-contained (no script): a link from DingTalk, WeCom, Discord or
Teams opens it in any browser; the POST form carries the link's token, so a link preview
or a crawler that only GETs never acts.
"""

from __future__ import annotations

from html import escape

VERBS = {"keep": "Keep", "release": "Release", "dismiss": "Dismiss"}

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{title} · gpufleet</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}}
button{{font:inherit;padding:.5rem 1.25rem}}.refused{{color:#b00020}}</style>
</head><body><main><h1>{title}</h1>{body}</main></body></html>
"""


def confirm_page(action: str, label: str, subject: str, who: str, token: str) -> str:
    """Asks ``who`` to confirm ``label`` ("Keep for 4 h") on ``subject`` (a recommendation)."""
    verb = VERBS.get(action, action)
    body = (
        f"<p>{escape(subject)}</p>"
        f"<p>Signed in as <strong>{escape(who)}</strong> by this link.</p>"
        '<form method="post" action="/ui/answer">'
        f'<input type="hidden" name="t" value="{escape(token, quote=True)}">'
        f'<button type="submit" name="confirm" value="1">{escape(label)}</button></form>'
    )
    return _PAGE.format(title=escape(f"{verb}?"), body=body)


def result_page(heading: str, text: str, refused: bool) -> str:
    css = ' class="refused"' if refused else ""
    return _PAGE.format(title=escape(heading), body=f"<p{css}>{escape(text)}</p>")
