//! Plain-text tables for the terminal (stable output, suitable for golden files).

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    right: Vec<bool>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            right: vec![false; header.len()],
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
    }

    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let fmt_row = |cells: &[String]| {
            let mut line = String::new();
            for i in 0..n {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = width[i] - c.chars().count();
                if i > 0 {
                    line.push_str("  ");
                }
                if self.right[i] {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                } else {
                    line.push_str(c);
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
        for r in &self.rows {
            out.push_str(&fmt_row(r));
            out.push('\n');
        }
        out
    }
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
