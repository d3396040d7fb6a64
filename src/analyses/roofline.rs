//! `roofline`: how close each op of the steady state runs to what the GPU can do (FLOPs and
//! bytes from the HLO's cost model over measured time, against the peaks of the GPU), and the
//! model and hardware FLOPs utilisation of each module, the step and the steady state
//! (docs/design.md, "Roofline"). The numbers are computed in `super::roofline_model`; this
//! file is the analysis: its share, terminal text and report section.

use anyhow::Result;

use super::roofline_model::{
    Roofline, RooflineParams, RooflinePartial, Utilisation, partial, reduce,
};
use crate::analyses::{Analysis, ProcessView, Reads, Reduced, RunShares, Share, ShareUse};
use crate::formats::gpus::{PeaksUsed, math_name};
use crate::formats::hlo::cost::Math;
use crate::report::Section;
use crate::units::{duration_ms, sig3};

/// The share: one process's ops with their costs.
pub struct RooflineShare;

impl Share for RooflineShare {
    const KIND: &'static str = "roofline-partial";
    const FILE: &'static str = file!();
    const READS: Reads = Reads::Gpu;
    const DEVICES: bool = true;
    type Param = ();
    type Value = RooflinePartial;

    fn map(&self, p: &ProcessView, _: &()) -> Result<RooflinePartial> {
        let mut out = p.with_programs(partial)?;
        // The peaks need the device metadata; a file that cannot be read costs the peaks,
        // not the analysis.
        match (p.devices)() {
            Ok(d) => out.devices = d,
            Err(e) => out.notes.push(format!("{}: {e:#}", p.label)),
        }
        Ok(out)
    }
}

/// The `roofline` analysis.
pub struct RooflineAnalysis;

impl Analysis for RooflineAnalysis {
    const NAME: &'static str = "roofline";
    const FILE: &'static str = file!();
    type Params = RooflineParams;
    type Result = Roofline;

    fn shares(&self, _: &RooflineParams) -> Vec<ShareUse> {
        vec![ShareUse::of(&RooflineShare, &())]
    }

    fn reduce(&self, run: &dyn RunShares, params: &RooflineParams) -> Result<Reduced<Roofline>> {
        let parts = run.all(&RooflineShare, &())?;
        let refs: Vec<&RooflinePartial> = parts.iter().map(|p| p.as_ref()).collect();
        let result = reduce(&refs, params);
        Ok(Reduced {
            notes: result.notes.clone(),
            result,
        })
    }

    fn render(&self, r: &Roofline) -> String {
        render(r)
    }

    fn sections(&self, r: &Roofline) -> Result<Vec<Section>> {
        Ok(vec![section(r)?])
    }
}

/// Ops in the terminal table.
const TOP_OPS: usize = 15;

/// A number for a narrow column: three significant figures, `<0.001` below that.
fn num(x: f64) -> String {
    crate::units::pct(x)
}

fn opt(v: Option<f64>) -> String {
    v.map_or("—".to_string(), num)
}

/// The peaks line: `NVIDIA H100 80GB HBM3: bf16 989 TFLOP/s, ..., HBM 3350 GB/s (how)`.
fn peaks_line(p: &PeaksUsed) -> String {
    let mut s: Vec<String> = p
        .tflops
        .iter()
        .map(|(m, t)| format!("{} {}", math_name(Some(*m)), sig3(*t)))
        .collect();
    if let Some(bw) = p.memory_gb_s {
        s.push(format!("HBM {} GB/s", sig3(bw)));
    }
    let mut line = format!(
        "peaks of {} (TFLOP/s): {}; {}",
        p.device,
        s.join(", "),
        p.source
    );
    if !p.overridden.is_empty() {
        line.push_str(&format!("; given with --peak: {}", p.overridden.join(", ")));
    }
    line
}

fn utilisation_line(what: &str, u: &Utilisation) -> String {
    // A no-break space keeps a percentage and its sign on one line of wrapped text.
    let pct = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{}\u{a0}%", num(v)));
    format!(
        "{what}: {} in {}, {} TFLOP/s; MFU {}, HFU {} ({}{})",
        flop(u.flops),
        duration_ms(u.time_ms),
        num(u.tflops),
        pct(u.mfu_percent),
        pct(u.hfu_percent),
        u.math.as_deref().unwrap_or("no matmuls"),
        // Said when the matmuls ran on other units than the peak's.
        match (&u.math, &u.mfu_math) {
            (Some(m), Some(p)) if m != p => format!(", of the {p} peak"),
            _ => String::new(),
        },
    )
}

/// A FLOP count with its prefix: `4.40 TFLOP`.
pub fn flop(x: f64) -> String {
    let mut v = x;
    for p in ["", "k", "M", "G", "T", "P"] {
        if v.abs() < 999.5 {
            return format!("{} {p}FLOP", sig3(v));
        }
        v /= 1e3;
    }
    format!("{} EFLOP", sig3(v))
}

/// The step's and the steady state's utilisation, a line each.
fn summary_lines(r: &Roofline) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s) = &r.step {
        out.push(utilisation_line(
            &format!(
                "step ({}, {} per device, every {})",
                s.module,
                sig3(s.steps),
                duration_ms(s.period_ms)
            ),
            &s.use_,
        ));
    }
    out.push(utilisation_line(
        &format!(
            "steady state ({}, first start to last end)",
            crate::table::count(r.steady.devices as usize, "device", "devices")
        ),
        &r.steady.use_,
    ));
    out
}

pub fn render(r: &Roofline) -> String {
    use crate::table::Table;
    use crate::units::{fit, wrap};
    let w = crate::analyses::TEXT_WIDTH;
    let mut out = String::new();
    if r.modules.is_empty() {
        return "No GPU module executions in the steady state.\n".to_string();
    }
    if let Some(p) = &r.peaks {
        out.push_str(&wrap(&peaks_line(p), w, 2));
        out.push('\n');
    }
    for line in summary_lines(r) {
        out.push_str(&wrap(&line, w, 2));
        out.push('\n');
    }
    let mut t = Table::new(&[
        "module", "time", "TFLOP/s", "MFU %", "HFU %", "math", "costed %",
    ]);
    t.align_right(&[1, 2, 3, 4, 6]);
    for m in r.modules.iter().take(8) {
        t.row(vec![
            fit(&m.module, 36),
            duration_ms(m.use_.time_ms),
            num(m.use_.tflops),
            opt(m.use_.mfu_percent),
            opt(m.use_.hfu_percent),
            m.use_.math.clone().unwrap_or("—".into()),
            num(m.costed_percent),
        ]);
    }
    out.push_str(&t.render());
    let mut t = Table::new(&[
        "op",
        "time",
        "%",
        "FLOP/B",
        "TFLOP/s",
        "GB/s",
        "math",
        "bound",
        "% of roof",
    ]);
    t.align_right(&[1, 2, 3, 4, 5, 8]);
    for o in r.ops.iter().take(TOP_OPS) {
        t.row(vec![
            fit(&format!("{} {}", o.opcode, o.thunk), 33),
            duration_ms(o.time_ms),
            num(o.percent),
            opt(o.intensity),
            num(o.tflops),
            num(o.gb_s),
            o.math.clone(),
            o.bound.clone().unwrap_or("—".into()),
            opt(o.roof_percent),
        ]);
    }
    out.push('\n');
    out.push_str(&t.render());
    let u = &r.uncosted;
    let left: Vec<String> = [
        ("communication", u.communication_ms),
        ("unattributed command-buffer time", u.command_buffer_ms),
        ("modules without HLO", u.without_hlo_ms),
        ("instructions not costed", u.not_costed_ms),
    ]
    .iter()
    .filter(|(_, ms)| *ms > 0.0)
    .map(|(what, ms)| format!("{what} {}", duration_ms(*ms)))
    .collect();
    if !left.is_empty() {
        out.push_str(&wrap(
            &format!("not in the roofline: {}", left.join(", ")),
            w,
            2,
        ));
        out.push('\n');
    }
    if r.ops_left_out.ops > 0 {
        let l = &r.ops_left_out;
        let text = format!(
            "roofline.json lists the longest ops; {} shorter ones ({}) are left out",
            l.ops,
            duration_ms(l.time_ms)
        );
        out.push_str(&wrap(&text, w, 2));
        out.push('\n');
    }
    out
}

/// Ops drawn on the chart at most (the longest first).
const CHART_OPS: usize = 400;

pub fn section(r: &Roofline) -> Result<Section> {
    use crate::report::{Cell, HtmlTable, charts};
    let mut sec = Section::new("roofline", "Roofline");
    if r.modules.is_empty() {
        sec.para("No GPU module executions in the steady state.");
        return Ok(sec);
    }
    sec.para(
        "FLOPs and bytes of each op from the HLO (its cost model), over its measured time: how \
         close it runs to the roof at its arithmetic intensity — the memory bandwidth × FLOP \
         per byte, or the peak of the unit its FLOPs run on. MFU: matmul FLOPs (recomputed \
         ones left out) ÷ (time × the peak of the math unit of most of them); HFU: every \
         FLOP executed over the same.",
    );
    match &r.peaks {
        Some(p) => sec.para(&peaks_line(p)),
        None => sec.para("No peaks for this GPU: achieved rates only (give them with --peak)."),
    };
    for line in summary_lines(r) {
        sec.para(&line);
    }
    if let Some(p) = &r.peaks {
        let points: Vec<charts::RoofPoint> = r
            .ops
            .iter()
            .filter(|o| o.flops > 0.0 && o.intensity.is_some() && o.tflops > 0.0)
            .take(CHART_OPS)
            .map(|o| charts::RoofPoint {
                intensity: o.intensity.unwrap_or(0.0),
                tflops: o.tflops,
                weight: o.time_ms,
                series: o.math.clone(),
            })
            .collect();
        let ceilings: Vec<(String, f64)> = p
            .tflops
            .iter()
            .filter(|(m, _)| {
                **m == Math::F32 || r.ops.iter().any(|o| o.math == math_name(Some(**m)))
            })
            .map(|(m, t)| (math_name(Some(*m)).to_string(), *t))
            .collect();
        if let Some(bw) = p.memory_gb_s
            && !points.is_empty()
        {
            sec.chart(charts::roofline(&points, &ceilings, bw)?);
            sec.para(
                "Each op is a point, its area its time; ops without FLOPs (copies, transposes) \
                 are in the table only.",
            );
        }
    }
    let mut t = HtmlTable::new(&[
        "module",
        "executions",
        "time",
        "TFLOP/s",
        "MFU %",
        "HFU %",
        "math",
        "costed %",
    ])
    .limit(50, Some("roofline.json"));
    for m in &r.modules {
        t.row(vec![
            Cell::text(&m.module),
            Cell::count(m.executions),
            Cell::ms(m.use_.time_ms),
            Cell::num(num(m.use_.tflops), m.use_.tflops),
            Cell::opt(m.use_.mfu_percent, sig3),
            Cell::opt(m.use_.hfu_percent, sig3),
            Cell::text(m.use_.math.clone().unwrap_or("—".into())),
            Cell::num(num(m.costed_percent), m.costed_percent),
        ]);
    }
    sec.table(&t);
    let mut t = HtmlTable::new(&[
        "module",
        "op",
        "opcode",
        "time",
        "%",
        "GFLOP",
        "MiB",
        "FLOP/B",
        "TFLOP/s",
        "GB/s",
        "math",
        "bound",
        "% of roof",
    ])
    .limit(100, Some("roofline.json"));
    for o in &r.ops {
        t.row(vec![
            Cell::text(&o.module),
            Cell::text(&o.thunk),
            Cell::text(&o.opcode),
            Cell::ms(o.time_ms),
            Cell::num(num(o.percent), o.percent),
            Cell::num(num(o.flops / 1e9), o.flops),
            Cell::num(num(o.bytes / 1048576.0), o.bytes),
            Cell::opt(o.intensity, sig3),
            Cell::num(num(o.tflops), o.tflops),
            Cell::num(num(o.gb_s), o.gb_s),
            Cell::text(&o.math),
            Cell::text(o.bound.clone().unwrap_or("—".into())),
            Cell::opt(o.roof_percent, sig3),
        ]);
    }
    sec.table(&t);
    Ok(sec)
}
