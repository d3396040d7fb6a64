//! Plain-text tables for the terminal (stable output, suitable for golden files).

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    right: Vec<bool>,
    /// The rows that are headings: one cell, printed whole across the columns.
    headings: Vec<bool>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            right: vec![false; header.len()],
            headings: Vec::new(),
        }
    }

    /// Right-align these columns (numbers).
    pub fn align_right(&mut self, cols: &[usize]) {
        for &c in cols {
            self.right[c] = true;
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
        self.headings.push(false);
    }

    /// A heading row: its text printed whole across the columns (not cut, not counted in
    /// the columns' widths), the rows under it grouped by it.
    pub fn heading(&mut self, text: String) {
        self.rows.push(vec![text]);
        self.headings.push(true);
    }

    /// The table within [`WIDTH`] columns.
    pub fn render(&self) -> String {
        self.render_within(WIDTH)
    }

    /// The table within `max` columns where it can be: the widest text (left-aligned) column
    /// gives up room first, down to [`NARROWEST`] characters, its cells cut with `…`.
    pub fn render_within(&self, max: usize) -> String {
        let n = self.header.len();
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for (r, _) in self.rows.iter().zip(&self.headings).filter(|(_, h)| !**h) {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
        while total(&width) > max {
            let over = total(&width) - max;
            let Some(i) = (0..n)
                .filter(|&i| !self.right[i] && width[i] > NARROWEST)
                .max_by_key(|&i| (width[i], std::cmp::Reverse(i)))
            else {
                break;
            };
            // Down to the next widest text column at most, so that wide ones share the cut.
            let next = (0..n)
                .filter(|&j| j != i && !self.right[j])
                .map(|j| width[j])
                .filter(|&w| w < width[i])
                .max()
                .unwrap_or(0)
                .max(NARROWEST);
            width[i] -= over.min(width[i] - next).max(1);
        }
        let fmt_row = |cells: &[String]| {
            let mut line = String::new();
            for i in 0..n {
                let c = cut_middle(cells.get(i).map(String::as_str).unwrap_or(""), width[i]);
                let pad = width[i].saturating_sub(c.chars().count());
                if i > 0 {
                    line.push_str("  ");
                }
                if self.right[i] {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(&c);
                } else {
                    line.push_str(&c);
                    if i + 1 < n {
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
            line.trim_end().to_string()
        };
        let mut out = fmt_row(&self.header);
        out.push('\n');
        out.push_str(
            &width
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("  "),
        );
        out.push('\n');
        for (r, heading) in self.rows.iter().zip(&self.headings) {
            if *heading {
                out.push_str(r[0].trim_end());
            } else {
                out.push_str(&fmt_row(r));
            }
            out.push('\n');
        }
        out
    }
}

/// `text` within `n` characters: its start and its last third kept, `…` between (a name's
/// end often says most: `reduce-sc…16 MiB`, `jit_step › …fusion.3`).
pub fn cut_middle(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        return text.to_string();
    }
    let tail = (n.saturating_sub(1)) / 3;
    let head = n.saturating_sub(1) - tail;
    let chars: Vec<char> = text.chars().collect();
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(chars[count - tail..].iter());
    out
}

/// The columns a table takes at most ([`Table::render`]): what terminals show when their
/// width is unknown. Tables stored with an analysis's text are laid out for it; printing
/// wraps them further for a narrower terminal ([`fit_lines`]).
pub const WIDTH: usize = 100;

/// The fewest characters a text column is cut to.
pub const NARROWEST: usize = 12;

/// `text` with every line longer than `width` columns wrapped at spaces, its continuation
/// lines indented four columns past the line's own indentation (a word longer than a line
/// is cut where the line ends).
pub fn fit_lines(text: &str, width: usize) -> String {
    let width = width.max(20);
    let mut out = String::with_capacity(text.len());
    for (k, line) in text.split('\n').enumerate() {
        if k > 0 {
            out.push('\n');
        }
        if line.chars().count() <= width {
            out.push_str(line);
            continue;
        }
        let indent = line
            .chars()
            .take_while(|c| *c == ' ')
            .count()
            .min(width / 2);
        let hang = " ".repeat((indent + 4).min(width / 2));
        let mut rest: Vec<char> = line.chars().collect();
        let mut first = true;
        loop {
            let room = if first { width } else { width - hang.len() };
            if !first {
                out.push_str(&hang);
            }
            if rest.len() <= room {
                out.extend(rest.iter());
                break;
            }
            // The last space within the room that leaves text before it, else a hard cut.
            let lead = if first { indent } else { 0 };
            let cut = (lead + 1..=room)
                .rev()
                .find(|&i| rest[i] == ' ')
                .unwrap_or(room);
            out.extend(rest[..cut].iter());
            out.push('\n');
            let skip = rest[cut..].iter().take_while(|c| **c == ' ').count();
            rest.drain(..cut + skip);
            first = false;
            if rest.is_empty() {
                break;
            }
        }
    }
    out
}

/// `mean ± std` with a sensible number of digits; `—` for missing values.
/// `n` things, singular or plural: `count(1, "node", "nodes")` is "1 node".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A number with up to 6 significant digits, without trailing zeros.
pub fn round_sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (5 - mag).clamp(0, 9) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned() {
        let mut t = Table::new(&["name", "n"]);
        t.align_right(&[1]);
        t.row(vec!["a".into(), "10".into()]);
        t.row(vec!["long".into(), "2".into()]);
        assert_eq!(t.render(), "name   n\n----  --\na     10\nlong   2\n");
    }

    #[test]
    fn a_wide_table_cuts_its_widest_text_column() {
        let mut t = Table::new(&["name", "other", "n"]);
        t.align_right(&[2]);
        t.row(vec!["a".repeat(30), "b".repeat(20), "1".into()]);
        let out = t.render_within(40);
        assert!(out.lines().all(|l| l.chars().count() <= 40), "{out}");
        assert!(
            out.contains(&format!("{}…{}", "a".repeat(10), "a".repeat(4))),
            "{out}"
        );
        assert_eq!(cut_middle("reduce-scatter 16 MiB", 15), "reduce-sca… MiB");
        assert!(out.contains(&"b".repeat(20)), "{out}");
        // Numbers are never cut: a table of numbers alone stays as wide as it is.
        let mut nums = Table::new(&["x", "y"]);
        nums.align_right(&[0, 1]);
        nums.row(vec!["1".repeat(30), "2".repeat(30)]);
        assert!(nums.render_within(40).contains(&"1".repeat(30)));
    }

    #[test]
    fn long_lines_wrap_under_their_indentation() {
        let text = format!(
            "short\n  {} {}\n{}",
            "w".repeat(15),
            "v".repeat(10),
            "x".repeat(45)
        );
        let out = fit_lines(&text, 20);
        assert_eq!(
            out,
            format!(
                "short\n  {}\n      {}\n{}\n    {}\n    {}",
                "w".repeat(15),
                "v".repeat(10),
                "x".repeat(20),
                "x".repeat(16),
                "x".repeat(9)
            )
        );
        assert!(out.lines().all(|l| l.chars().count() <= 20), "{out}");
    }

    #[test]
    fn numbers() {
        assert_eq!(round_sig(1.1020004), "1.102");
        assert_eq!(round_sig(126.50796), "126.508");
    }
}

/// A byte count for people: `512 B`, `1.5 MiB`.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{x:.1} {}", units[u])
    }
}
