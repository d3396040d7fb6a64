//! The page around the sections: header, navigation, styles and script inline, and the
//! files the sections embed carried as JSON strings.

use super::{Section, escape};
use anyhow::{Result, anyhow};

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// What a report shows.
pub struct Page {
    /// The `<title>` and heading.
    pub title: String,
    /// The line under the heading.
    pub subtitle: String,
    /// The strip above the sections (the headline's `html`, empty for none).
    pub headline: String,
    pub sections: Vec<Section>,
}

/// The page as one HTML document. `file` gives the content of a file a section embeds; a
/// file it cannot give is an error (a section would show nothing).
pub fn render_page<'a>(page: &Page, file: impl Fn(&str) -> Option<&'a str>) -> Result<String> {
    let mut body = String::new();
    let mut embeds: Vec<(&str, &str)> = Vec::new();
    for s in &page.sections {
        body.push_str(&format!(
            "<section id=\"{}\">\n<h2>{}</h2>\n{}</section>\n",
            escape(&s.id),
            escape(&s.title),
            s.html
        ));
        for e in &s.embeds {
            if embeds.iter().any(|(n, _)| n == e) {
                continue;
            }
            let content =
                file(e).ok_or_else(|| anyhow!("section {}: no file {e} to show", s.id))?;
            embeds.push((e, content));
        }
    }
    let mut nav = String::new();
    for s in &page.sections {
        nav.push_str(&format!(
            "<a href=\"#{}\">{}</a>",
            escape(&s.id),
            escape(&s.title)
        ));
    }
    let mut data = String::new();
    for (name, content) in embeds {
        // A JSON string, with `<` escaped so that no `</script>` inside can end the element.
        let json = serde_json::to_string(content)?.replace('<', "\\u003c");
        data.push_str(&format!(
            "<script type=\"application/json\" class=\"embed\" data-name=\"{}\">{json}</script>\n",
            escape(name)
        ));
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <title>{title}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <header><h1>{title}</h1><p>{subtitle}</p></header>\n{headline}<nav>{nav}</nav>\n<main>\n{body}</main>\n\
         {data}<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        title = escape(&page.title),
        subtitle = escape(&page.subtitle),
        headline = page.headline,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_embedded_files_once_and_safely() {
        let mut a = Section::new("flame", "Flame");
        a.flame_graph("f.svg");
        let mut b = Section::new("again", "Again");
        b.flame_graph("f.svg");
        let page = Page {
            title: "t <1>".into(),
            subtitle: "s".into(),
            headline: String::new(),
            sections: vec![a, b],
        };
        let html =
            render_page(&page, |n| (n == "f.svg").then_some("<svg></script></svg>")).unwrap();
        assert_eq!(html.matches("class=\"embed\"").count(), 1);
        assert!(
            html.contains("\"\\u003csvg>\\u003c/script>\\u003c/svg>\""),
            "{html}"
        );
        assert!(html.contains("<title>t &lt;1&gt;</title>"));
        assert!(html.contains("<section id=\"again\">"));
        let missing = render_page(&page, |_| None).unwrap_err().to_string();
        assert_eq!(missing, "section flame: no file f.svg to show");
    }
}
