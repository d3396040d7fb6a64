//! The faces of a history: terminal lines, `history.md` (the change points first, each with
//! its commits and the ops that moved) and an HTML page with one chart per metric.

use anyhow::Result;

use super::{Change, History, MetricSeries};
use crate::compare::explain::op_phrase;
use crate::report::{Page, Section, escape, render_page};

fn pct(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

fn short(commit: &Option<String>) -> String {
    commit
        .as_deref()
        .map(|c| {
            let (hash, rest) = c.split_once(' ').unwrap_or((c, ""));
            let hash: String = hash.chars().take(10).collect();
            format!(" ({hash}{}{rest})", if rest.is_empty() { "" } else { " " })
        })
        .unwrap_or_default()
}

/// `at c20 (1a2b3c) +5.1 % (p 2.1e-9), after c19`.
pub fn change_phrase(c: &Change) -> String {
    format!(
        "{} at {}{} after {}{}: {:.4} → {:.4} (p {:.1e})",
        pct(c.at.change),
        c.after,
        short(&c.commit_after),
        c.before,
        short(&c.commit_before),
        c.at.mean_before,
        c.at.mean_after,
        c.at.p_value
    )
}

fn flagged(m: &MetricSeries) -> bool {
    !m.changes.is_empty() || m.possible.is_some()
}

/// `possible regression at run-9 (+8.0 %): 2 more runs to confirm`.
fn possible_phrase(p: &super::record::Possible) -> String {
    format!(
        "possible {} from {} on ({:+.1} %): {} to confirm",
        if p.change.regression {
            "regression"
        } else {
            "improvement"
        },
        p.change.after,
        100.0 * p.change.at.change,
        crate::table::count(p.more, "more run", "more runs")
    )
}

pub fn terminal(h: &History) -> String {
    let mut s = format!(
        "{} over {}; {} with change points\n",
        crate::table::count(h.metrics.len(), "metric", "metrics"),
        crate::table::count(h.runs.len(), "run", "runs"),
        h.metrics.iter().filter(|m| flagged(m)).count()
    );
    for n in &h.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    for m in h.metrics.iter().filter(|m| flagged(m)) {
        s.push_str(&format!("{} [{}]\n", m.metric, m.unit));
        for c in &m.changes {
            let word = if c.regression { "worse" } else { "better" };
            s.push_str(&format!("  {word} {}\n", change_phrase(c)));
            for o in c.ops.iter().take(3) {
                s.push_str(&format!("      {}\n", op_phrase(o)));
            }
            if let Some(hlo) = &c.hlo {
                s.push_str(&format!("      HLO: {hlo}\n"));
            }
        }
        if let Some(p) = &m.possible {
            s.push_str(&format!("  {}\n", possible_phrase(p)));
        }
    }
    s
}

pub fn markdown(h: &History) -> String {
    let flagged_n = h.metrics.iter().filter(|m| flagged(m)).count();
    let mut s = format!(
        "## History of {}: {} of {} with change points\n\n",
        crate::table::count(h.runs.len(), "run", "runs"),
        flagged_n,
        crate::table::count(h.metrics.len(), "metric", "metrics")
    );
    for n in &h.notes {
        s.push_str(&format!("> {n}\n\n"));
    }
    for m in h.metrics.iter().filter(|m| flagged(m)) {
        s.push_str(&format!("### `{}` [{}]\n\n", m.metric, m.unit));
        for c in &m.changes {
            s.push_str(&format!(
                "- {} **{}**\n",
                if c.regression { "❌" } else { "✅" },
                change_phrase(c)
            ));
            for o in &c.ops {
                s.push_str(&format!("  - `{}`\n", op_phrase(o)));
            }
            if let Some(hlo) = &c.hlo {
                s.push_str(&format!("  - HLO: {hlo}\n"));
            }
        }
        if let Some(p) = &m.possible {
            s.push_str(&format!("- ⚠️ {}\n", possible_phrase(p)));
        }
        s.push('\n');
    }
    let quiet: Vec<String> = h
        .metrics
        .iter()
        .filter(|m| !flagged(m))
        .map(|m| format!("`{}`", m.metric))
        .collect();
    if !quiet.is_empty() {
        s.push_str(&format!(
            "<details><summary>{} without change points</summary>\n\n{}\n\n</details>\n\n",
            crate::table::count(quiet.len(), "metric", "metrics"),
            quiet.join(", ")
        ));
    }
    let p = &h.params;
    s.push_str(&format!(
        "<sub>Each point: the median of a run's samples. Change points: E-Divisive means (energy statistic, α = 1) split recursively, each split kept when Welch's t-test between the runs on either side (up to the neighbouring change points) gives p ≤ {} (times the splits its window offers) and the means differ by at least {:.1} % and by at least {} times the series' run-to-run noise, with at least {} runs a side; the weakest that fails against its final neighbours is dropped until none fails. A step in the newest runs is confirmed by 3 runs whose mean moved by at least 3 times the noise of the runs before them (each by 1.5 times, the same way), and flagged as possible after 1 or 2 runs that each moved by 3 times. Deterministic. nsys-jax-pipe {}.</sub>\n",
        p.max_p,
        100.0 * p.min_change,
        p.min_effect,
        p.min_size,
        env!("CARGO_PKG_VERSION")
    ));
    s
}

fn section(h: &History, m: &MetricSeries) -> Result<Section> {
    let id = format!(
        "m-{}",
        m.metric
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
    );
    let mut sec = Section::new(&id, &m.metric);
    let pts: Vec<(f64, f64, f64, f64)> = m
        .points
        .iter()
        .map(|p| (p.run as f64, p.median, p.q1, p.q3))
        .collect();
    let changes: Vec<f64> = m.changes.iter().map(|c| c.at.index as f64).collect();
    let labels: Vec<String> = h.runs.iter().map(|r| r.label.clone()).collect();
    let x_fmt = |x: f64| {
        let i = x.round();
        if (x - i).abs() < 1e-9 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let y_fmt = |y: f64| format!("{}", crate::table::round_sig(y));
    let svg = crate::report::charts::runs_over_time(
        &pts,
        &changes,
        ("run", &x_fmt),
        (&format!("median [{}] (bars: quartiles)", m.unit), &y_fmt),
    )?;
    sec.chart(svg);
    if let Some(n) = &m.note {
        sec.para(n);
    }
    if let Some(p) = &m.possible {
        sec.para(&possible_phrase(p));
    }
    for c in &m.changes {
        let mut html = format!(
            "<p><strong>{}</strong> {}</p>",
            if c.regression { "worse" } else { "better" },
            escape(&change_phrase(c))
        );
        if !c.ops.is_empty() {
            html.push_str("<ul>");
            for o in &c.ops {
                html.push_str(&format!("<li><code>{}</code></li>", escape(&op_phrase(o))));
            }
            html.push_str("</ul>");
        }
        if let Some(hlo) = &c.hlo {
            html.push_str(&format!("<p>HLO: {}</p>", escape(hlo)));
        }
        sec.raw(&html);
    }
    Ok(sec)
}

/// The HTML page: the metrics with change points first.
pub fn html(h: &History) -> Result<String> {
    let mut order: Vec<&MetricSeries> = h.metrics.iter().collect();
    order.sort_by_key(|m| !flagged(m));
    let mut sections = Vec::new();
    for m in order {
        sections.push(section(h, m)?);
    }
    let page = Page {
        title: format!(
            "nsys-jax-pipe history: {} → {}",
            h.runs.first().map(|r| r.label.as_str()).unwrap_or(""),
            h.runs.last().map(|r| r.label.as_str()).unwrap_or("")
        ),
        subtitle: format!(
            "{} · {} with change points",
            crate::table::count(h.runs.len(), "run", "runs"),
            crate::table::count(
                h.metrics.iter().filter(|m| flagged(m)).count(),
                "metric",
                "metrics"
            )
        ),
        headline: String::new(),
        sections,
    };
    render_page(&page, |_| None)
}
