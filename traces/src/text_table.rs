//! The aligned text tables the commands' summaries print: a header line and
//! a line per row, each column as wide as its widest cell and two spaces
//! from the next, numbers right-aligned and names left-aligned. [comfy-table]
//! does the layout; this wrapper fixes the house style (no borders, no
//! wrapping at the terminal's width, no trailing spaces), so that a summary
//! reads the same on a terminal, in a pipe and in a run's `summary.txt`.
//!
//! [comfy-table]: https://docs.rs/comfy-table

use comfy_table::{CellAlignment, Table, presets};

/// A table under construction; [`TextTable::render`] lays it out.
#[derive(Debug, Clone)]
pub struct TextTable {
    table: Table,
    indent: String,
}

impl TextTable {
    /// A table with these column headers, every column right-aligned (see
    /// [`TextTable::left`]).
    pub fn new<S: ToString>(header: impl IntoIterator<Item = S>) -> Self {
        let mut table = Table::new();
        table.load_preset(presets::NOTHING);
        table.set_header(
            header
                .into_iter()
                .map(|h| h.to_string())
                .collect::<Vec<_>>(),
        );
        for c in table.column_iter_mut() {
            c.set_padding((0, 2));
            c.set_cell_alignment(CellAlignment::Right);
        }
        TextTable {
            table,
            indent: String::new(),
        }
    }

    /// Left-aligns the columns `cols` (0-based): the names, not the numbers.
    pub fn left(mut self, cols: &[usize]) -> Self {
        for &i in cols {
            if let Some(c) = self.table.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Left);
            }
        }
        self
    }

    /// Starts every line of the table with `prefix`.
    pub fn indent(mut self, prefix: &str) -> Self {
        self.indent = prefix.to_string();
        self
    }

    /// Adds a row, a cell per column (a short row leaves the last cells
    /// empty).
    pub fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.table
            .add_row(cells.into_iter().map(|c| c.to_string()).collect::<Vec<_>>());
        self
    }

    /// The rows added so far, the header not counted.
    pub fn len(&self) -> usize {
        self.table.row_count()
    }

    /// Whether no row has been added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table, a line per row after the header, each ending in `\n`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for line in self.table.lines() {
            s.push_str(&self.indent);
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s
    }
}

impl std::fmt::Display for TextTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::TextTable;

    #[test]
    fn columns_fit_their_widest_cell_and_align_by_kind() {
        let mut t = TextTable::new(["mode", "ms/it", "source"]).left(&[0, 2]);
        t.row(["baseline-cpu", "12.345", "meas"]);
        t.row(["tcast-nmp", "1.2", "sim"]);
        assert_eq!(
            t.render(),
            "mode           ms/it  source\n\
             baseline-cpu  12.345  meas\n\
             tcast-nmp        1.2  sim\n"
        );
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn no_line_ends_in_spaces_and_short_rows_are_padded() {
        let mut t = TextTable::new(["a", "b", "c"]).indent("  ");
        t.row(["1"]);
        t.row(["22", "333", ""]);
        let s = t.render();
        assert!(
            s.lines().all(|l| !l.ends_with(' ') && l.starts_with("  ")),
            "{s:?}"
        );
        assert_eq!(s, "   a    b  c\n   1\n  22  333\n");
    }

    #[test]
    fn a_header_alone_is_one_line() {
        let t = TextTable::new(["x", "y"]);
        assert!(t.is_empty());
        assert_eq!(t.to_string(), "x  y\n");
    }
}
