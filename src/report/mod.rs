//! The HTML report (docs/design.md, "HTML report"): one self-contained page (styles, scripts,
//! charts and data inline; nothing
//! fetched) made of sections. Each analysis draws its own sections
//! ([`crate::analyses::Analysis::sections`]); this module holds what they share: the section
//! type, tables, charts ([`charts`], SVG drawn with `plotters`) and the page around them.
//!
//! Large files an analysis already writes (the flame graphs) are not copied into its
//! sections: a section names them ([`Section::embeds`]) and the page carries them once, as
//! data its script opens in a frame of their own (an inferno flame graph is a standalone SVG
//! document with its own script).

pub mod charts;
pub mod overview;
mod page;

pub use page::{Page, render_page};

use serde::{Deserialize, Serialize};

/// One `<section>` of the report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Section {
    /// Its element id (`<section id="...">`), stable: tests and links use it.
    pub id: String,
    pub title: String,
    /// Its body (HTML, already escaped).
    pub html: String,
    /// Files of the analysis's output that the body shows (by `data-embed` name).
    pub embeds: Vec<String>,
}

impl Section {
    pub fn new(id: &str, title: &str) -> Section {
        Section {
            id: id.to_string(),
            title: title.to_string(),
            html: String::new(),
            embeds: Vec::new(),
        }
    }

    /// A subheading.
    pub fn heading(&mut self, text: &str) -> &mut Self {
        self.html.push_str(&format!("<h3>{}</h3>\n", escape(text)));
        self
    }

    /// A paragraph of plain text.
    pub fn para(&mut self, text: &str) -> &mut Self {
        self.html.push_str(&format!("<p>{}</p>\n", escape(text)));
        self
    }

    /// Notes of the analysis, as a list.
    pub fn notes(&mut self, notes: &[String]) -> &mut Self {
        if !notes.is_empty() {
            self.html.push_str("<ul class=\"notes\">\n");
            for n in notes {
                self.html.push_str(&format!("<li>{}</li>\n", escape(n)));
            }
            self.html.push_str("</ul>\n");
        }
        self
    }

    /// A chart (an SVG document from [`charts`]).
    pub fn chart(&mut self, svg: String) -> &mut Self {
        self.html.push_str("<figure class=\"chart\">");
        // The XML declaration is not needed inline.
        let body = match svg.find("<svg") {
            Some(i) => &svg[i..],
            None => &svg,
        };
        self.html.push_str(body);
        self.html.push_str("</figure>\n");
        self
    }

    pub fn table(&mut self, t: &HtmlTable) -> &mut Self {
        self.html.push_str(&t.render());
        self
    }

    /// An interactive flame graph: the SVG file `file` of the analysis's output.
    pub fn flame_graph(&mut self, file: &str) -> &mut Self {
        self.html.push_str(&format!(
            "<div class=\"flame\" data-embed=\"{}\"></div>\n",
            escape(file)
        ));
        self.embeds.push(file.to_string());
        self
    }

    /// Raw HTML (the caller escapes).
    pub fn raw(&mut self, html: &str) -> &mut Self {
        self.html.push_str(html);
        self
    }
}

/// Text escaped for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A cell: text shown, and the number it sorts by (None: sorts as text).
pub struct Cell {
    pub text: String,
    pub value: Option<f64>,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell {
            text: s.into(),
            value: None,
        }
    }
    /// A number shown as `text`, sorted by `value`.
    pub fn num(text: impl Into<String>, value: f64) -> Cell {
        Cell {
            text: text.into(),
            value: Some(value),
        }
    }
    /// A duration in milliseconds, shown with its unit.
    pub fn ms(ms: f64) -> Cell {
        Cell::num(crate::units::duration_ms(ms), ms)
    }
    /// A count.
    pub fn count(n: u64) -> Cell {
        Cell::num(n.to_string(), n as f64)
    }
    /// An optional number; `—` when absent.
    pub fn opt(v: Option<f64>, show: impl Fn(f64) -> String) -> Cell {
        match v {
            Some(v) => Cell::num(show(v), v),
            None => Cell::num("—", f64::NEG_INFINITY),
        }
    }
}

/// A table whose columns sort on a click of their header.
pub struct HtmlTable {
    header: Vec<String>,
    /// The rows shown (at most `limit`).
    rows: Vec<Vec<Cell>>,
    /// Every row, shown or not.
    count: usize,
    /// Rows shown at most; the rest are counted in a last line.
    limit: usize,
    /// Where the full table is (a file of the output), said when rows are left out.
    full: Option<String>,
}

impl HtmlTable {
    pub fn new(header: &[&str]) -> HtmlTable {
        HtmlTable {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            count: 0,
            limit: 50,
            full: None,
        }
    }
    pub fn limit(mut self, n: usize, full: Option<&str>) -> Self {
        self.limit = n;
        self.full = full.map(str::to_string);
        self
    }
    /// A row: kept when fewer than `limit` are, else only counted.
    pub fn row(&mut self, cells: Vec<Cell>) {
        if self.rows.len() < self.limit {
            self.rows.push(cells);
        }
        self.count += 1;
    }
    /// Whether another row would be shown (a caller with many rows stops making them, and
    /// counts the rest with [`HtmlTable::more`]).
    pub fn is_full(&self) -> bool {
        self.rows.len() >= self.limit
    }
    /// Count `n` rows that are not shown.
    pub fn more(&mut self, n: usize) {
        self.count += n;
    }
    pub fn render(&self) -> String {
        let mut s = String::from("<table class=\"sortable\"><thead><tr>");
        for h in &self.header {
            s.push_str(&format!("<th>{}</th>", escape(h)));
        }
        s.push_str("</tr></thead><tbody>\n");
        for row in &self.rows {
            s.push_str("<tr>");
            for c in row {
                match c.value {
                    Some(v) => s.push_str(&format!(
                        "<td class=\"n\" data-v=\"{}\">{}</td>",
                        if v.is_finite() { v } else { -1e308 },
                        escape(&c.text)
                    )),
                    // Long text (op names, paths) may break anywhere; words stay whole.
                    None if c.text.chars().count() > 40 => {
                        s.push_str(&format!("<td class=\"wrap\">{}</td>", escape(&c.text)))
                    }
                    None => s.push_str(&format!("<td>{}</td>", escape(&c.text))),
                }
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</tbody></table>\n");
        if self.count > self.rows.len() {
            let rest = match &self.full {
                Some(f) => format!("; all of them are in {f}"),
                None => String::new(),
            };
            s.push_str(&format!(
                "<p class=\"more\">{} of {} rows shown{}.</p>\n",
                self.rows.len(),
                self.count,
                escape(&rest)
            ));
        }
        s
    }
}

/// A list of facts, each a name and its value (`<dl class="facts">`).
pub fn facts_list(facts: &[(String, String)]) -> String {
    let mut html = String::from("<dl class=\"facts\">\n");
    for (k, v) in facts {
        html.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", escape(k), escape(v)));
    }
    html.push_str("</dl>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn tables_sort_by_value_and_say_what_is_left_out() {
        let mut t = HtmlTable::new(&["name", "time"]).limit(1, Some("ops.json"));
        t.row(vec![Cell::text("<fusion>"), Cell::ms(1.5)]);
        t.row(vec![Cell::text("b"), Cell::ms(0.5)]);
        let html = t.render();
        assert!(html.contains("<td>&lt;fusion&gt;</td>"), "{html}");
        assert!(html.contains("data-v=\"1.5\">1.50 ms</td>"), "{html}");
        assert!(!html.contains("<td>b</td>"), "{html}");
        assert!(html.contains("1 of 2 rows shown; all of them are in ops.json."));
        let mut t = HtmlTable::new(&["n"]).limit(1, None);
        t.row(vec![Cell::count(1)]);
        assert!(t.is_full());
        t.more(9);
        assert!(t.render().contains("1 of 10 rows shown."));
    }
}
