"""Terminal tables that stay readable in a narrow terminal: `FitTable` stacks its rows when the
terminal cannot show its columns without cutting a word.

A rich `Table` wider than the terminal narrows its widest columns first, whatever their words,
and cuts the words that no longer fit (`verdi…`, `comforta…`, even at 120 columns). A `FitTable`
is drawn as a table when every column can keep `WRAP_AFTER` characters, or its widest cell where
that is narrower: rich then narrows no column below that, so no word of up to `WRAP_AFTER`
characters is cut (longer cells wrap at spaces; a longer word, a URL, folds onto the next line
instead of being cut). Narrower than that, each row is drawn as a block: the first cell as a
heading, then one `header  value` line per other column, the values wrapped at the terminal's
width. Nothing is cut in either form.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

WRAP_AFTER = 16
"""Cells longer than this may wrap inside a column (prose: a note, the changes, a reason)."""


class FitTable(Table):
    """A rich `Table` that stacks its rows where the terminal is too narrow (see the module)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self._comfortable_width(console, options) <= options.max_width:
            for column in self.columns:
                if column.overflow == "ellipsis":
                    column.overflow = "fold"  # NB: a word longer than the column folds, uncut
            yield from super().__rich_console__(console, options)
            return
        yield self._stacked()

    def _comfortable_width(self, console: Console, options: ConsoleOptions) -> int:
        """The width the table needs for every header and cell up to `WRAP_AFTER` characters
        on one line."""
        _, right, _, left = self.padding
        total = self._extra_width
        for column in self.columns:
            cells: list[RenderableType] = list(column.cells)
            if self.show_header:
                cells.append(column.header)
            width = max(
                (min(console.measure(c, options=options).maximum, WRAP_AFTER) for c in cells),
                default=0,
            )
            total += width + left + right
        return total

    def _stacked(self) -> Group:
        """Each row as a heading (its first cell) and one line per other column."""
        parts: list[RenderableType] = []
        if self.title:
            title = self.title if isinstance(self.title, Text) else Text(str(self.title))
            parts.append(Text.assemble(title, style="bold italic"))
        columns = self.columns
        rows = list(zip(*(list(c.cells) for c in columns), strict=True)) if columns else []
        for row in rows:
            first, *rest = row
            parts.append(Text.assemble(_text(first), style="bold"))
            grid = Table.grid(padding=(0, 2))
            grid.add_column(no_wrap=True, style="dim")
            grid.add_column(overflow="fold")
            for column, cell in zip(columns[1:], rest, strict=True):
                if _text(cell).plain.strip():
                    grid.add_row(_text(column.header), cell)
            parts.append(Padding(grid, (0, 0, 0, 2), expand=False))
        return Group(*parts)


def _text(cell: RenderableType) -> Text:
    """A cell as Text (a str is read as rich markup, as a Table reads it)."""
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))
