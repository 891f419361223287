"""Model answers that try to get live HTML through the Markdown display (shared with tests/ui).

Each payload, if any of it ran, would set ``window.__pwned`` (scripts, event handlers,
``javascript:`` URLs that a test clicks).
"""

from __future__ import annotations

PWN = "window.__pwned=1"

PAYLOADS: dict[str, str] = {
    # the two that got through the old regex escaper
    "escaped-backtick": f"\\`<img src=x onerror={PWN}>`",
    "fence-info-backtick": f"``` x`y\n<img src=x onerror={PWN}>\n```",
    # the usual vectors
    "img-onerror": f"<img src=x onerror={PWN}>",
    "script": f"<script>{PWN}</script>",
    "svg-onload": f"<svg onload={PWN}></svg>",
    "html-block": f"<div>\n<img src=x onerror={PWN}>\n</div>",
    "html-comment-block": f"<!-- x -->\n<img src=x onerror={PWN}>",
    "iframe": f'<iframe src="javascript:{PWN}"></iframe>',
    "javascript-link": f"[click me](javascript:{PWN})",
    "javascript-link-entity": f"[click me](&#106;avascript:{PWN})",
    "javascript-link-case": f"[click me](JaVaScRiPt:{PWN})",
    "javascript-autolink": f"<javascript:{PWN}>",
    "vbscript-link": "[click me](vbscript:msgbox(1))",
    "data-html-link": "[click me](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "reference-link": f"[click me][r]\n\n[r]: javascript:{PWN}",
    "image-onerror-alt": f'![x" onerror="{PWN}](x)',
    "image-javascript": f"![x](javascript:{PWN})",
    "entities": f"&lt;img src=x onerror={PWN}&gt; &#60;script&#62;{PWN}&#60;/script&#62;",
    "link-title-quote": f'[a](http://example.com "t\\" onmouseover=\\"{PWN}")',
    "code-span-html": f"`<img src=x onerror={PWN}>`",
    "table-ish": f"| a |\n|---|\n| <img src=x onerror={PWN}> |",
    "nested-emphasis": f"*<img src=x onerror={PWN}>*",
}
