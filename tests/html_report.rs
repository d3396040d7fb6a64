//! The HTML report in a real browser (headless Chromium, driven over the DevTools protocol):
//! every expected section is in the DOM after the scripts ran, nothing is logged as an error,
//! no request leaves the file, and a click on a flame graph zooms it. A screenshot of each
//! report is written under the test's temporary folder (its path is printed).

use crate::common::browser::Browser;
use crate::common::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What every analyze report has, and the default pipeline's sections.
const DEFAULT_SECTIONS: &[&str] = &[
    "findings",
    "overview",
    "modules",
    "provenance",
    "communication",
    "stragglers",
    "compilation",
    "ops",
    "flamegraph-source",
    "flamegraph-op_name",
    "memory",
    "roofline",
    "whatif",
];
const MIB: u64 = 1024 * 1024;

/// Where the screenshots go: kept after the test (printed), under the system's temp folder.
fn shots() -> PathBuf {
    let d = std::env::temp_dir().join("nsys-jax-pipe-html-report");
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Loaded {
    session: String,
    sections: Vec<String>,
    load_ms: f64,
}

/// Open `html` in a new page, wait for its scripts and flame graphs, check the console and
/// the network, and save a screenshot as `name.png`.
fn load(b: &mut Browser, html: &Path, name: &str) -> Loaded {
    let session = b.new_page();
    let since = b.events.len();
    let url = format!("file://{}", html.canonicalize().unwrap().display());
    b.call(Some(&session), "Page.navigate", json!({ "url": url }));
    b.wait_event(&session, "Page.loadEventFired", since);
    // The flame graphs open in frames of their own: wait until each has loaded.
    let ready = "Array.from(document.querySelectorAll('.flame')).every(div => { \
                 const f = div.querySelector('iframe'); \
                 const d = f && f.contentDocument; \
                 return !!d && d.readyState === 'complete' && !!d.querySelector('svg'); })";
    let deadline = Instant::now() + Duration::from_secs(30);
    while b.eval(&session, ready) != json!(true) {
        if Instant::now() > deadline {
            let why = b.eval(
                &session,
                "Array.from(document.querySelectorAll('.flame')).map(d => { \
                 const f = div.querySelector('iframe'); \
                 return !f ? 'no frame' : (f.src.slice(0, 30) + ' ' + \
                 (f.contentDocument ? f.contentDocument.documentElement.outerHTML.slice(0, 300) \
                 : 'no document')); })",
            );
            b.drain();
            let events: Vec<String> = b.events[since..]
                .iter()
                .filter(|e| e["method"] != json!("Network.dataReceived"))
                .map(|e| e.to_string().chars().take(400).collect())
                .collect();
            panic!(
                "{name}: flame graphs not shown: {why}\n{}",
                events.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let sections: Vec<String> = serde_json::from_value(b.eval(
        &session,
        "Array.from(document.querySelectorAll('section')).map(s => s.id)",
    ))
    .unwrap();
    let load_ms = b
        .eval(
            &session,
            "performance.getEntriesByType('navigation')[0].loadEventEnd",
        )
        .as_f64()
        .unwrap();
    let png = b.screenshot(&session);
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    let shot = shots().join(format!("{name}.png"));
    std::fs::write(&shot, png).unwrap();
    eprintln!(
        "{name}: loaded in {load_ms:.0} ms; screenshot {}",
        shot.display()
    );
    b.drain();
    let mut problems = Vec::new();
    for e in &b.events[since..] {
        if e["sessionId"] != json!(session) {
            continue;
        }
        let p = &e["params"];
        match e["method"].as_str().unwrap_or("") {
            "Runtime.consoleAPICalled"
                if matches!(p["type"].as_str(), Some("error" | "assert")) =>
            {
                problems.push(format!("console error: {}", p["args"]))
            }
            "Runtime.exceptionThrown" => {
                problems.push(format!("exception: {}", p["exceptionDetails"]))
            }
            "Log.entryAdded" if p["entry"]["level"] == json!("error") => {
                problems.push(format!("log error: {}", p["entry"]))
            }
            "Network.requestWillBeSent" => {
                let u = p["request"]["url"].as_str().unwrap_or("");
                if !["file://", "blob:", "data:", "about:"]
                    .iter()
                    .any(|s| u.starts_with(s))
                {
                    problems.push(format!("a request leaves the file: {u}"));
                }
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{name}:\n{}", problems.join("\n"));
    Loaded {
        session,
        sections,
        load_ms,
    }
}

/// Click a frame of the flame graph in section `id`: its view must change (the frame widens
/// to the graph's width, and Reset Zoom appears).
fn flame_graph_zooms(b: &mut Browser, session: &str, id: &str) {
    let pick = format!(
        "(() => {{ const f = document.querySelector('#{id} iframe'); f.scrollIntoView(); \
         const d = f.contentDocument; const width = d.documentElement.getBoundingClientRect().width; \
         const g = Array.from(d.querySelectorAll('#frames > g')).find(g => {{ \
           const w = g.querySelector('rect').getBoundingClientRect().width; return w > 12 && w < 0.6 * width; }}); \
         if (!g) return null; \
         window.scrollBy(0, f.getBoundingClientRect().top + g.querySelector('rect').getBoundingClientRect().top - 300); \
         const r = g.querySelector('rect').getBoundingClientRect(); \
         const fr = f.getBoundingClientRect(); \
         return {{x: fr.left + r.left + r.width / 2, y: fr.top + r.top + r.height / 2, width: r.width, \
                  title: g.querySelector('title').textContent, \
                  hidden: d.getElementById('unzoom').classList.contains('hide')}}; }})()"
    );
    let before = b.eval(session, &pick);
    assert!(
        before.is_object(),
        "{id}: no frame narrower than the graph to click"
    );
    assert_eq!(
        before["hidden"],
        json!(true),
        "{id}: zoomed before any click"
    );
    let (x, y) = (before["x"].as_f64().unwrap(), before["y"].as_f64().unwrap());
    b.click(session, x, y);
    let title = serde_json::to_string(&before["title"]).unwrap();
    let after = b.eval(
        session,
        &format!(
            "(() => {{ const d = document.querySelector('#{id} iframe').contentDocument; \
             const g = Array.from(d.querySelectorAll('#frames > g')) \
               .find(g => g.querySelector('title').textContent === {title}); \
             return {{width: g.querySelector('rect').getBoundingClientRect().width, \
                      hidden: d.getElementById('unzoom').classList.contains('hide')}}; }})()"
        ),
    );
    let (w0, w1) = (
        before["width"].as_f64().unwrap(),
        after["width"].as_f64().unwrap(),
    );
    if w1 <= 1.5 * w0 {
        let why = b.eval(
            session,
            &format!(
                "(() => {{ const f = document.querySelector('#{id} iframe'); const w = f.contentWindow; \
                 const fr = f.getBoundingClientRect(); \
                 const e = w.document.elementFromPoint({x} - fr.left, {y} - fr.top); \
                 return {{init: !!w.unzoombtn, top: document.elementFromPoint({x}, {y}).tagName, \
                 inner: e ? e.outerHTML.slice(0, 200) : null, scrollY: window.scrollY, fr: [fr.left, fr.top]}}; }})()"
            ),
        );
        panic!("{id}: clicking {title} did not zoom ({w0} px -> {w1} px): {why}");
    }
    assert_eq!(
        after["hidden"],
        json!(false),
        "{id}: no Reset Zoom after a click"
    );
}

fn has_all(loaded: &Loaded, expected: &[&str], name: &str) {
    for id in expected {
        assert!(
            loaded.sections.iter().any(|s| s == id),
            "{name}: no section {id} in {:?}",
            loaded.sections
        );
    }
}

fn browser(tmp: &Path) -> Option<Browser> {
    let chromium = crate::common::testutil::chromium_path()?;
    Some(Browser::launch(&chromium, &tmp.join("profile")))
}

#[test]
#[cfg_attr(
    not(all(test_fixtures, test_chromium)),
    ignore = "needs the shared fixtures and Chromium"
)]
fn the_pax_report_with_every_analysis_loads_and_its_flame_graphs_zoom() {
    let Some(f) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut b) = browser(tmp.path()) else {
        return;
    };
    let html = tmp.path().join("pax.html");
    let mut extra: Vec<String> = Vec::new();
    for a in all_analyses() {
        extra.extend(["--analysis".into(), a.to_string()]);
    }
    extra.extend(["-q".into(), "--html".into(), html.display().to_string()]);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let o = analyze(
        &tmp.path().join("cache"),
        &tmp.path().join("out"),
        &extra,
        &pax_archives(&f),
    );
    assert_ok(&o);
    let size = std::fs::metadata(&html).unwrap().len();
    eprintln!("pax report: {size} bytes");
    assert!(size <= 5 * MIB, "pax report is {size} bytes");
    let loaded = load(&mut b, &html, "pax4-every-analysis");
    has_all(&loaded, DEFAULT_SECTIONS, "pax");
    has_all(&loaded, &["stragglers", "pgle"], "pax");
    let session = loaded.session.clone();
    flame_graph_zooms(&mut b, &session, "flamegraph-source");
    flame_graph_zooms(&mut b, &session, "flamegraph-op_name");
    // The overview names what ran where.
    let overview = b.eval(&session, "document.getElementById('overview').textContent");
    let overview = overview.as_str().unwrap();
    assert!(overview.contains("NVIDIA A100-SXM4-40GB"), "{overview}");
    assert!(
        overview.contains("4: proc0.zip, proc1.zip, proc2.zip, proc3.zip"),
        "{overview}"
    );
    // Sorting: a click on the module table's "total" header orders rows by it.
    let order = b.eval(
        &session,
        "(() => { const t = document.querySelector('#modules table'); \
         const th = Array.from(t.querySelectorAll('th')).find(h => h.textContent === 'total'); \
         const col = Array.from(th.parentNode.children).indexOf(th); th.click(); \
         return Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[col].dataset.v)); })()",
    );
    let v: Vec<f64> = serde_json::from_value(order).unwrap();
    assert!(v.len() > 3 && v.windows(2).all(|w| w[0] <= w[1]), "{v:?}");
    eprintln!("pax report load time: {:.0} ms", loaded.load_ms);
    // The report is a node: a second run builds nothing.
    let again = analyze(
        &tmp.path().join("cache"),
        &tmp.path().join("out"),
        &[&extra[..], &["--explain"]].concat(),
        &pax_archives(&f),
    );
    assert_ok(&again);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("0 nodes executed"), "{text}");
}

/// `analyze REPORT --html` of a capture with `nsys`.
fn capture_report(tmp: &Path, nsys: &Path, report: &Path, name: &str) -> PathBuf {
    let html = tmp.join(format!("{name}.html"));
    let cache = tmp.join("cache");
    let out = tmp.join(name);
    assert_ok(&run_with_nsys(
        nsys,
        &[
            "analyze".as_ref(),
            "-q".as_ref(),
            "--cache-dir".as_ref(),
            cache.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--html".as_ref(),
            html.as_os_str(),
            report.as_os_str(),
        ],
    ));
    html
}

#[test]
#[cfg_attr(not(all(test_nsys, test_chromium)), ignore = "needs nsys and Chromium")]
fn a_capture_and_a_compare_of_two_captures_load() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(nsys) = nsys() else { return };
    let Some(mut b) = browser(tmp.path()) else {
        return;
    };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let base = data.join("command-buffers/rep.nsys-rep");
    let head = data.join("command-buffers-collectives/rep.nsys-rep");
    let html = capture_report(tmp.path(), &nsys, &base, "capture");
    let loaded = load(&mut b, &html, "capture-command-buffers");
    has_all(&loaded, DEFAULT_SECTIONS, "capture");
    flame_graph_zooms(&mut b, &loaded.session, "flamegraph-source");

    let compare_html = tmp.path().join("compare.html");
    let o = run_with_nsys(
        &nsys,
        &[
            "compare".as_ref(),
            "--cache-dir".as_ref(),
            tmp.path().join("cache").as_os_str(),
            "-o".as_ref(),
            tmp.path().join("compare").as_os_str(),
            "--html".as_ref(),
            compare_html.as_os_str(),
            base.as_os_str(),
            head.as_os_str(),
        ],
    );
    assert!(matches!(o.status.code(), Some(0 | 1)), "{o:?}");
    let loaded = load(&mut b, &compare_html, "compare-two-captures");
    has_all(
        &loaded,
        &["verdict", "changes", "thunks", "added-removed"],
        "compare",
    );
    let session = loaded.session;
    let verdict = b.eval(&session, "document.querySelector('.verdict').textContent");
    let json = json(&tmp.path().join("compare/compare.json"));
    // The terminal wraps the line to its width: compared with the spaces made one.
    let one_space = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let headline = one_space(&String::from_utf8_lossy(&o.stdout));
    assert!(
        headline.contains(&one_space(verdict.as_str().unwrap())),
        "{verdict} not in {headline}"
    );
    let points = b.eval(
        &session,
        "document.querySelectorAll('#changes svg circle').length",
    );
    let with_change = json["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !["thunk", "op", "rate"].contains(&m["family"].as_str().unwrap_or("")))
        .filter(|m| m["stat"]["change"].is_number())
        .count()
        .min(40);
    assert_eq!(points, json!(with_change), "one point per metric drawn");
}

#[test]
#[cfg_attr(
    not(all(test_fixtures, test_nsys, test_chromium)),
    ignore = "needs the shared fixtures, nsys and Chromium"
)]
fn an_nvtx_only_capture_and_a_long_capture_load() {
    let Some(f) = fixtures() else { return };
    let Some(nsys) = nsys() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut b) = browser(tmp.path()) else {
        return;
    };
    let html = capture_report(
        tmp.path(),
        &nsys,
        &f.join("h200/compile_1proc/rep.nsys-rep"),
        "nvtx-only",
    );
    let loaded = load(&mut b, &html, "nvtx-only-capture");
    has_all(&loaded, DEFAULT_SECTIONS, "nvtx-only");
    let session = loaded.session.clone();
    let compilation = b.eval(
        &session,
        "document.querySelectorAll('#compilation svg rect').length",
    );
    assert!(
        compilation.as_u64().unwrap() > 3,
        "no compile bars: {compilation}"
    );

    let html = capture_report(
        tmp.path(),
        &nsys,
        &f.join("h200/long_1proc/rep.nsys-rep"),
        "long",
    );
    let size = std::fs::metadata(&html).unwrap().len();
    eprintln!("long_1proc report: {size} bytes");
    assert!(size <= 5 * MIB, "long_1proc report is {size} bytes");
    let loaded = load(&mut b, &html, "long-1proc");
    has_all(&loaded, DEFAULT_SECTIONS, "long");
    eprintln!("long_1proc report load time: {:.0} ms", loaded.load_ms);
}

/// Without a browser: the example's report is one file that asks for nothing, has every
/// default section in the pipeline's order with a link to each, carries each flame graph
/// once, and is read back from the cache by an unchanged run.
#[test]
fn the_example_report_is_self_contained_and_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp-fsdp-2gpu.zip");
    let html = tmp.path().join("report.html");
    let args = ["-q", "--html", html.to_str().unwrap()];
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    assert_ok(&analyze(
        &cache,
        &out,
        &args,
        std::slice::from_ref(&example),
    ));
    let page = std::fs::read_to_string(&html).unwrap();
    let ids: Vec<&str> = page
        .match_indices("<section id=\"")
        .map(|(i, m)| page[i + m.len()..].split('"').next().unwrap())
        .collect();
    assert_eq!(ids, DEFAULT_SECTIONS);
    for id in &ids {
        assert!(
            page.contains(&format!("<a href=\"#{id}\">")),
            "no link to {id}"
        );
    }
    assert!(page.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    for outside in ["src=\"http", "href=\"http", "url(http", "@import", "<link"] {
        assert!(
            !page.contains(outside),
            "the page refers outside: {outside}"
        );
    }
    for svg in ["flamegraph-source.svg", "flamegraph-op_name.svg"] {
        let carried = format!("class=\"embed\" data-name=\"{svg}\"");
        assert_eq!(page.matches(&carried).count(), 1, "{svg}");
    }
    assert!(page.contains("2 × NVIDIA H200"), "GPU model missing");
    // Unchanged: everything, the page included, is read back.
    let again = analyze(
        &cache,
        &out,
        &[&args[..], &["--explain"]].concat(),
        &[example],
    );
    assert_ok(&again);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("html-report"), "{text}");
    assert!(text.contains("0 nodes executed"), "{text}");
    assert_eq!(std::fs::read_to_string(&html).unwrap(), page);
}

/// `analyze` writes report.html into its output folder unless told not to, says where on its
/// last line, and the page opens with the headline strip: the step time, MFU and HFU, the top
/// finding and what fixing it buys, read in Chromium.
#[test]
#[cfg_attr(not(test_chromium), ignore = "needs Chromium")]
fn the_report_is_written_by_default_and_leads_with_the_headline() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut b) = browser(tmp.path()) else {
        return;
    };
    let pairs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pairs");
    let cache = tmp.path().join("cache");
    let fact = |b: &mut Browser, s: &str, name: &str| {
        b.eval(
            s,
            &format!(
                "(e => e ? e.textContent : null)(document.querySelector('#headline \
                 [data-fact={name}] .value'))"
            ),
        )
    };
    // A GPT step on an H200 (its numbers: tests/data/pairs/README.md and the roofline's).
    let out = tmp.path().join("gpt");
    let o = analyze(&cache, &out, &[], &[pairs.join("gpt_cudnn.zip")]);
    assert_ok(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let page = out.join("report.html");
    assert_eq!(
        stdout.lines().last().unwrap(),
        format!("report: {}", page.display())
    );
    assert!(
        stdout.starts_with("──── headline ────\nstep 32.7 ms"),
        "{stdout}"
    );
    let loaded = load(&mut b, &page, "headline-gpt");
    let s = loaded.session.clone();
    assert_eq!(fact(&mut b, &s, "step"), json!("32.7 ms"));
    assert_eq!(fact(&mut b, &s, "mfu"), json!("53.5 %"));
    assert_eq!(fact(&mut b, &s, "hfu"), json!("54.8 %"));
    let finding = fact(&mut b, &s, "finding");
    assert!(finding.as_str().unwrap().contains("6.43 %"), "{finding}");
    // Above everything else: the strip ends before the navigation and the first section.
    let order = b.eval(
        &s,
        "(() => { const h = document.querySelector('#headline').getBoundingClientRect(); \
         const n = document.querySelector('nav').getBoundingClientRect(); \
         return h.height > 0 && h.bottom <= n.top + 1; })()",
    );
    assert_eq!(order, json!(true), "the headline is not at the top");
    // A host-bound loop: its top finding and the step its fix predicts.
    let out = tmp.path().join("host");
    assert_ok(&analyze(&cache, &out, &[], &[pairs.join("host_bound.zip")]));
    let loaded = load(&mut b, &out.join("report.html"), "headline-host");
    let s = loaded.session.clone();
    assert_eq!(fact(&mut b, &s, "step"), json!("18.5 ms"));
    let label = b.eval(
        &s,
        "document.querySelector('#headline [data-fact=finding] .label').textContent",
    );
    let label = label.as_str().unwrap();
    assert!(label.contains("→ step 18.5 ms → 1.21 ms"), "{label}");
    // --no-html: no page, and no report line.
    let out = tmp.path().join("none");
    let o = analyze(
        &cache,
        &out,
        &["--no-html"],
        &[pairs.join("host_bound.zip")],
    );
    assert_ok(&o);
    assert!(!out.join("report.html").exists());
    assert!(!String::from_utf8_lossy(&o.stdout).contains("report: "));
}
