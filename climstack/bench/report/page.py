"""The report's blocks as Markdown (plots linked) and as one self-contained HTML file (plots
inline as data URIs, no script, no outside resource). Blocks: ("h1"|"h2"|"p", text),
("table", head, rows), ("ul", items), ("img", path, alt); text may hold `code` and
**strong** spans."""

import base64
import html
import re
from pathlib import Path

STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em;
       border-bottom: 1px solid #ccc; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left;
         vertical-align: top; }
th { background: #f0f0f0; }
tbody tr:nth-child(even) { background: #fafafa; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""


def markdown_table(head: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells):
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return [line(head), "|" + "---|" * len(head)] + [line(row) for row in rows]


def markdown(blocks: list[tuple], out: Path) -> str:
    """Markdown; images linked relative to `out`, the report's directory."""
    lines = []
    for kind, *content in blocks:
        if kind in ("h1", "h2"):
            lines += ["#" * int(kind[1]) + " " + content[0]]
        elif kind == "p":
            lines += [content[0]]
        elif kind == "table":
            lines += markdown_table(*content)
        elif kind == "ul":
            lines += [f"- {item}" for item in content[0]]
        elif kind == "img":
            path, alt = content
            link = path.relative_to(out) if path.is_relative_to(out) else path
            lines += [f"![{alt}]({link})"]
        lines += [""]
    return "\n".join(lines)


def _inline(text: str) -> str:
    """Escaped text with its `code` and **strong** spans as HTML."""
    text = html.escape(text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ['<div class="scroll"><table>', "<thead><tr>"]
    out += [f"<th>{_inline(cell)}</th>" for cell in head]
    out += ["</tr></thead>", "<tbody>"]
    for row in rows:
        out += ["<tr>" + "".join(f"<td>{_inline(cell)}</td>" for cell in row) + "</tr>"]
    return out + ["</tbody></table></div>"]


def _image(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def to_html(blocks: list[tuple], title: str = "Benchmark comparison") -> str:
    """One HTML document, every plot inline."""
    body = []
    for kind, *content in blocks:
        if kind in ("h1", "h2", "p"):
            body += [f"<{kind}>{_inline(content[0])}</{kind}>"]
        elif kind == "table":
            body += _table(*content)
        elif kind == "ul":
            body += ["<ul>"] + [f"<li>{_inline(item)}</li>" for item in content[0]] + ["</ul>"]
        elif kind == "img":
            body += [_image(*content)]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title>",
            f"<style>{STYLE}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )
