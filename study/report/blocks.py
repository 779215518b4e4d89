"""The report as a list of blocks (heading, text, list, table, figure), rendered to Markdown and to
a self-contained HTML page (figures embedded), each file written whole or not at all."""

from __future__ import annotations

import base64
import html
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from study.output import text_writer, write_files_atomic


@dataclass
class Block:
    kind: str  # "h1" | "h2" | "h3" | "p" | "list" | "table" | "figure" | "answers"
    content: object  # answers: [(question, [(sentence, anchor of its evidence)])]
    caption: str = ""
    anchor: str = ""  # an id a link can point at (#anchor), on headings and figures


def figure_block(path: Path, caption: str) -> list[Block]:
    """A figure's block, or none where the figure was not drawn."""
    return [Block("figure", path, caption)] if path.exists() else []


def fmt_seconds(value: float) -> str:
    """Seconds with a unit and three digits; '–' where it does not apply, '∞' not reached."""
    if value is None or value != value:
        return "–"
    if not np.isfinite(value):
        return "∞"
    if value >= 1:
        return f"{value:.3g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


LONG_TABLE = 15


def _md_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [
        ["–" if v is None or v != v else str(v) for v in row]
        for row in frame.itertuples(index=False)]
    cells = [[c.replace("|", "\\|") for c in row] for row in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
    lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(lines)


EVIDENCE = "evidence"


def render_markdown(blocks: list[Block], figures_relative_to: Path) -> str:
    parts = []
    for block in blocks:
        if block.anchor:
            parts.append(f'<a id="{block.anchor}"></a>')
        if block.kind in ("h1", "h2", "h3"):
            parts.append("#" * int(block.kind[1]) + " " + block.content)
        elif block.kind == "p":
            parts.append(block.content)
        elif block.kind == "list":
            parts.append("\n".join(f"- {item.strip()}" for item in block.content))
        elif block.kind == "table":
            parts.append(_md_table(block.content))
        elif block.kind == "figure":
            rel = os.path.relpath(Path(block.content).resolve(), figures_relative_to.resolve())
            parts.append(f"![{block.caption}]({Path(rel).as_posix()})\n\n*{block.caption}*")
        elif block.kind == "answers":
            parts.append("\n".join(
                f"- **{question}**\n" + "\n".join(
                    f"  - {sentence} [{EVIDENCE}](#{anchor})" for sentence, anchor in answers)
                for question, answers in block.content))
    return "\n\n".join(parts) + "\n"


def render_html(blocks: list[Block], title: str) -> str:
    body = []
    for block in blocks:
        anchor = f' id="{html.escape(block.anchor)}"' if block.anchor else ""
        if anchor and block.kind not in ("h1", "h2", "h3", "figure"):
            body.append(f"<a{anchor}></a>")  # a paragraph, list or table a link points at
        if block.kind in ("h1", "h2", "h3"):
            body.append(f"<{block.kind}{anchor}>{html.escape(block.content)}</{block.kind}>")
        elif block.kind == "p":
            body.append(f"<p>{html.escape(block.content)}</p>")
        elif block.kind == "list":
            items = "".join(f"<li>{html.escape(i.strip())}</li>" for i in block.content)
            body.append(f"<ul>{items}</ul>")
        elif block.kind == "table":
            table = block.content.to_html(index=False, border=0, classes="results",
                                          escape=True, na_rep="–")
            if len(block.content) > LONG_TABLE:  # long tables fold away, the figures lead
                table = (f"<details><summary>{html.escape(block.caption or 'table')} "
                         f"({len(block.content)} rows)</summary>{table}</details>")
            body.append(table)
        elif block.kind == "figure":
            data = base64.b64encode(Path(block.content).read_bytes()).decode()
            body.append(f'<figure{anchor}><img src="data:image/png;base64,{data}" '
                        f'alt="{html.escape(block.caption)}"><figcaption>'
                        f"{html.escape(block.caption)}</figcaption></figure>")
        elif block.kind == "answers":
            body.append('<ul class="answers">' + "".join(
                f"<li><b>{html.escape(question)}</b><ul>" + "".join(
                    f'<li>{html.escape(sentence)} <a href="#{html.escape(anchor)}">'
                    f"{EVIDENCE}</a></li>" for sentence, anchor in answers) + "</ul></li>"
                for question, answers in block.content) + "</ul>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.4}"
             "table.results{border-collapse:collapse;font-size:12px}"
             "table.results td,table.results th{border-bottom:1px solid #ddd;padding:2px 6px}"
             "img{max-width:100%}figcaption{font-style:italic;font-size:13px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def write_report(blocks: list[Block], out_dir: Path, title: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / "report.md", out_dir / "report.html"
    markdown, page_html = render_markdown(blocks, out_dir), render_html(blocks, title)
    write_files_atomic({md: text_writer(markdown), page: text_writer(page_html)})  # both or neither
    return md, page
