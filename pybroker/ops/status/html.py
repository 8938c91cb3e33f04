"""The status page's markup: one layout, tables, pagers, links; everything user-given
(topic names, group ids, member and client ids, hosts) goes through `esc` or `href`.

No JavaScript and no external resource: the page refreshes itself with a meta refresh, and
the CSS is inline and small. Narrow screens get one column, tables that scroll sideways in
their own box, and the same figures as on a desktop.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import quote

__all__ = ["esc", "href", "layout", "table", "pager", "cards"]

CSS = """
*{box-sizing:border-box}
body{margin:0;font:15px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:#1b1f24;background:#f4f6f8}
header{background:#1b2a3a;color:#fff;padding:10px 16px;display:flex;flex-wrap:wrap;
gap:4px 16px;align-items:baseline}
header a{color:#fff;text-decoration:none;font-weight:600;font-size:18px}
header span{color:#c8d3de;font-size:13px}
main{max-width:1100px;margin:0 auto;padding:12px}
h1{font-size:20px;margin:8px 0 12px;word-break:break-all}
h2{font-size:17px;margin:20px 0 8px}
section{background:#fff;border-radius:8px;padding:10px 12px;margin-bottom:12px;
box-shadow:0 1px 2px rgba(0,0,0,.08)}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e3e7eb;white-space:nowrap}
th{color:#57606a;font-weight:600;background:#fafbfc}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
a{color:#0b5cad}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(110px,1fr));gap:8px;
margin-bottom:12px}
.card{background:#fff;border-radius:8px;padding:8px 12px;box-shadow:0 1px 2px rgba(0,0,0,.08)}
.card b{display:block;font-size:22px}
.card span{color:#57606a;font-size:13px}
.bad{color:#b42318;font-weight:600}
.ok{color:#1a7f37}
.muted{color:#6e7781}
.tag{display:inline-block;font-size:12px;padding:0 6px;border-radius:8px;background:#e7ecf2;
color:#344}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:12px}
figure.chart{margin:0}
figure.chart figcaption{font-weight:600;margin-bottom:4px}
figure.chart svg{width:100%;height:auto;display:block}
figure.chart svg text{font-size:12px;fill:#57606a}
figure.chart svg .grid{stroke:#e3e7eb}
.legend{list-style:none;padding:0;margin:4px 0 0;display:flex;flex-wrap:wrap;gap:4px 14px;
font-size:13px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
.pager{margin-top:8px;font-size:14px}
.pager a{margin-right:12px}
footer{color:#6e7781;font-size:12px;text-align:center;padding:12px}
"""


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def href(*segments: object) -> str:
    """A path whose every segment is percent-encoded (a group id may hold '/', '?', '#')."""
    return "/" + "/".join(quote(str(s), safe="") for s in segments)


def layout(title: str, heading: str, body: str, *, subtitle: str,
           refresh_seconds: int) -> str:
    refresh = (f'<meta http-equiv="refresh" content="{refresh_seconds}">'
               if refresh_seconds > 0 else "")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"{refresh}<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<header><a href=\"/\">pybroker</a><span>{subtitle}</span></header>"
            f"<main><h1>{heading}</h1>{body}</main>"
            f"<footer>refreshes every {refresh_seconds} s · "
            "<a href=\"/metrics\">/metrics</a> · <a href=\"/readyz\">/readyz</a></footer>"
            "</body></html>\n")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *,
          numeric: frozenset[int] = frozenset(), empty: str = "none",
          table_id: str = "") -> str:
    """Cells are markup already (escaped by the caller); `numeric` columns align right."""
    def cls(i: int) -> str:
        return ' class="num"' if i in numeric else ""
    head = "".join(f"<th{cls(i)}>{h}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(row))
                   + "</tr>" for row in rows)
    if not body:
        return f'<p class="muted">{empty}</p>'
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return (f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def pager(page: int, pages: int, total: int, noun: str, *base: object) -> str:
    """'page 2 of 7 (640 partitions) · previous · next'; nothing when one page holds all."""
    if pages <= 1:
        return ""
    links = []
    if page > 1:
        links.append(f'<a href="{href(*base, page - 1)}">← previous</a>')
    if page < pages:
        links.append(f'<a href="{href(*base, page + 1)}">next →</a>')
    return (f'<div class="pager">page {page} of {pages} ({total} {noun}) '
            + "".join(links) + "</div>")


def cards(items: Iterable[tuple[str, object, bool]]) -> str:
    """Summary figures: (label, value, alarming)."""
    return '<div class="cards">' + "".join(
        f'<div class="card"><b{" class=bad" if bad else ""}>{esc(value)}</b>'
        f"<span>{esc(label)}</span></div>" for label, value, bad in items) + "</div>"
