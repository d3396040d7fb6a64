//! Rules on collectives: exposed communication, slow collectives, stragglers.

use std::collections::BTreeMap;

use super::finding::{Context, Evidence, Inputs, Outcome, category_ms, count, ev, pc, remedy};
use crate::analyses::communication::BandwidthRow;
use crate::analyses::ops::TopThunk;
use crate::analyses::stragglers::{DeviceRow, Stragglers};
use crate::units::{bytes, duration_ms, sig3};

const COLLECTIVES: &[&str] = &[
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "all-reduce-start",
    "all-gather-start",
    "collective-permute-start",
    "send",
    "recv",
    "collective-broadcast",
    "ragged-all-to-all",
];

pub(super) fn exposed_communication(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(ops) = &ins.ops else {
        return Outcome::NoData("no ops output".into());
    };
    let Some(exposed) = category_ms(ops, "communication").filter(|&c| c > 0.0) else {
        return Outcome::NoData("no collectives in the steady state".into());
    };
    let mut evidence = vec![ev(
        "ops",
        format!(
            "collectives not hidden by computation: {} ({} of the steady state)",
            duration_ms(exposed),
            pc(cx.percent(exposed))
        ),
    )];
    // Time a device spends in a collective waiting for a late one is the stragglers' finding,
    // not the collective's: what is at stake here is the rest.
    let wait: f64 = ins
        .stragglers
        .as_ref()
        .map_or(0.0, |s| s.per_module.iter().map(|m| m.wait_ms).sum());
    let at_stake = (exposed - wait).max(0.0);
    if wait > 0.0 {
        evidence.push(ev(
            "stragglers",
            format!(
                "of which waiting for the last device to arrive: {} (left to the stragglers rule)",
                duration_ms(wait)
            ),
        ));
    }
    if let Some(c) = &ins.communication {
        if let Some(h) = c.overall_hidden_fraction {
            evidence.push(ev(
                "communication",
                format!(
                    "hidden behind computation: {} of the collectives' time",
                    pc(100.0 * h)
                ),
            ));
        }
        for (k, h) in &c.hidden_fraction {
            evidence.push(ev(
                "communication",
                format!("{k}: {} hidden", pc(100.0 * h)),
            ));
        }
    }
    let mut comm: Vec<&TopThunk> = ops
        .top_thunks
        .iter()
        .filter(|t| {
            COLLECTIVES.iter().any(|c| {
                t.opcode
                    .strip_prefix(c)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
            })
        })
        .collect();
    comm.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    for t in comm.iter().take(3) {
        evidence.push(Evidence {
            module: Some(t.module.clone()),
            op: Some(t.thunk.clone()),
            op_name: Some(t.op_name.clone()).filter(|s| !s.is_empty()),
            source: Some(t.source.clone()).filter(|s| !s.is_empty()),
            ..ev(
                "ops",
                format!(
                    "{} ({}) in {}: {} over {} executions",
                    t.thunk,
                    t.opcode,
                    t.module,
                    duration_ms(t.total_ms),
                    count(t.executions as f64)
                ),
            )
        });
    }
    let remedies = vec![
        remedy(
            "Make the next computation independent of the collective's result: with FSDP gather \
             the next layer's weights while this one computes, reduce-scatter gradients while the \
             backward pass goes on; avoid sharding that needs a result at once",
            "a collective whose result the very next op reads cannot overlap anything; XLA can \
             only hide collectives that have independent work beside them",
        ),
        remedy(
            "Turn on the latency-hiding scheduler: XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true",
            "it schedules collectives asynchronously and moves independent computation between \
             their start and done",
        ),
        remedy(
            "Feed the scheduler measured costs (PGLE): `nsys-jax-pipe analyze --analysis pgle` writes \
             pgle/; pass it with --xla_gpu_pgle_profile_file_or_directory_path=OUT/pgle \
             (or jax.config.update('jax_enable_pgle', True))",
            "with measured op times the scheduler overlaps what really takes time, not what its \
             analytical model guesses",
        ),
        remedy(
            "Tune how collectives are combined: --xla_gpu_all_reduce_combine_threshold_bytes, \
             --xla_gpu_all_gather_combine_threshold_bytes, --xla_gpu_reduce_scatter_combine_threshold_bytes",
            "fewer, larger collectives pay the per-collective latency once; too large ones \
             leave nothing to overlap them with",
        ),
    ];
    cx.finding(
        "exposed-communication",
        format!(
            "Communication not hidden by computation: {} of the steady state",
            pc(cx.percent(at_stake))
        ),
        at_stake,
        evidence,
        remedies,
    )
}

/// Messages at least this large [bytes] should reach the link's bandwidth.
const LARGE_MESSAGE: f64 = 16.0 * 1024.0 * 1024.0;
/// A large collective below this share of the link's bus bandwidth is slow.
const SLOW_FRACTION: f64 = 0.4;

/// The bus bandwidth [GB/s] a collective over one node's GPUs can reach: NVLink per GPU
/// (one direction), by product.
fn link_gbps(device: &str) -> Option<(f64, &'static str)> {
    let d = device.to_ascii_uppercase();
    if d.contains("H100") && !d.contains("PCIE")
        || d.contains("H200")
        || d.contains("H800") && !d.contains("PCIE")
    {
        Some((450.0, "NVLink 4 (18 links × 25 GB/s per direction)"))
    } else if d.contains("B200") || d.contains("GB200") || d.contains("B100") {
        Some((900.0, "NVLink 5 (18 links × 50 GB/s per direction)"))
    } else if d.contains("A100") && !d.contains("PCIE") {
        Some((300.0, "NVLink 3 (12 links × 25 GB/s per direction)"))
    } else {
        None
    }
}

pub(super) fn slow_collectives(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(c) = &ins.communication else {
        return Outcome::NoData("no communication output".into());
    };
    let large: Vec<&BandwidthRow> = c
        .bandwidth
        .iter()
        .filter(|r| r.message_size_bytes as f64 >= LARGE_MESSAGE)
        .collect();
    if large.is_empty() {
        return Outcome::NoData(format!("no collective of {} or more", bytes(LARGE_MESSAGE)));
    }
    let device = ins
        .roofline
        .as_ref()
        .and_then(|r| r.peaks.as_ref())
        .map(|p| p.device.clone());
    let Some((link, what)) = device.as_deref().and_then(link_gbps) else {
        return Outcome::NoData(format!(
            "the link of {} is not known",
            device.as_deref().unwrap_or("this GPU")
        ));
    };
    if cx.devices < 2 {
        return Outcome::NoData("one device".into());
    }
    let n = cx.devices as f64;
    let mut at_stake = 0.0;
    let mut evidence = Vec::new();
    for r in &large {
        let (size, bw, k) = (
            r.message_size_bytes as f64,
            r.bus_bandwidth_gbps,
            r.instances as f64,
        );
        if bw <= 0.0 || bw >= SLOW_FRACTION * link {
            continue;
        }
        // Bus bandwidth = size / time × the collective's factor (2(n-1)/n for all-reduce,
        // (n-1)/n for gathers and scatters): the time back from it, on every device.
        let kind = &r.collective;
        let factor = if kind.starts_with("all-reduce") {
            2.0 * (n - 1.0) / n
        } else {
            (n - 1.0) / n
        };
        let t_ms = size * factor / (bw * 1e9) * 1e3;
        at_stake += k * n * t_ms * (1.0 - bw / link);
        evidence.push(ev(
            "communication",
            format!(
                "{kind} of {}: {} GB/s bus bandwidth, {} of {} GB/s, {} instances",
                bytes(size),
                sig3(bw),
                pc(100.0 * bw / link),
                sig3(link),
                count(k)
            ),
        ));
    }
    if evidence.is_empty() {
        return Outcome::Quiet(format!(
            "large collectives at {} % or more of {what}",
            sig3(SLOW_FRACTION * 100.0)
        ));
    }
    evidence.push(ev(
        "roofline",
        format!("link: {what}, {} GB/s per GPU", sig3(link)),
    ));
    cx.finding(
        "slow-collectives",
        format!(
            "Large collectives run far below the link's bandwidth ({} GB/s)",
            sig3(link)
        ),
        at_stake,
        evidence,
        vec![
            remedy(
                "Check NCCL's transport: NCCL_DEBUG=INFO shows whether it uses NVLink (P2P/NVLS) \
                 or falls back to PCIe or sockets; check NCCL_P2P_DISABLE and the container's \
                 access to /dev/nvidia* and IPC",
                "a large collective on NVLink reaches most of the link; far below that the data \
                 takes a slower path",
            ),
            remedy(
                "Look for contention: collectives overlapping heavy memory traffic or other \
                 collectives, and NCCL_MIN_NCHANNELS / NCCL_NVLS_ENABLE",
                "channels and copy engines shared with computation slow a collective down",
            ),
        ],
    )
}

pub(super) fn stragglers(ins: &Inputs, cx: &Context) -> Outcome {
    let Some(s) = &ins.stragglers else {
        return Outcome::NoData("no stragglers output".into());
    };
    if s.devices < 2 || s.aligned_instances == 0 {
        return Outcome::NoData("fewer than two devices meet at collectives".into());
    }
    let modules = &s.per_module;
    let wait: f64 = modules.iter().map(|m| m.wait_ms).sum();
    let name_of: BTreeMap<&str, &str> = modules
        .iter()
        .map(|m| (m.program_id.as_str(), m.name.as_str()))
        .collect();
    let mut evidence = Vec::new();
    let late_rank = late_rank(s);
    let late = late_rank.as_ref().map(|l| l.device);
    if let Some(l) = &late_rank {
        evidence.push(Evidence {
            device: late,
            ..ev(
                "stragglers",
                format!(
                    "device {} arrives last at the first collective of {} of {} steps, late by \
                     {} (median; up to {})",
                    l.device,
                    count(l.steps_last),
                    count(l.steps),
                    duration_ms(l.median_us / 1e3),
                    duration_ms(l.max_us / 1e3)
                ),
            )
        });
    }
    for m in modules.iter().filter(|m| m.wait_ms > 0.0).take(3) {
        evidence.push(Evidence {
            module: Some(m.name.clone()),
            ..ev(
                "stragglers",
                format!(
                    "{}: the others wait {} ({} of its time)",
                    m.name,
                    duration_ms(m.wait_ms),
                    pc(m.wait_percent)
                ),
            )
        });
    }
    for w in s.worst.iter().take(2) {
        let module = name_of.get(w.program_id.as_str()).copied().unwrap_or("");
        evidence.push(Evidence {
            module: Some(module.to_string()),
            op: Some(w.thunk.clone()),
            device: Some(w.last_device as i64),
            ..ev(
                "stragglers",
                format!(
                    "{module} execution {}, {}: device {} late by {}",
                    w.execution,
                    w.thunk,
                    w.last_device,
                    duration_ms(w.late_by_us / 1e3)
                ),
            )
        });
    }
    let title = match &late_rank {
        Some(l) => format!(
            "Device {} is late by {} per step (median over {} steps): the others wait {} for it \
             at collectives ({} of the steady state)",
            l.device,
            duration_ms(l.median_us / 1e3),
            count(l.steps),
            duration_ms(wait),
            pc(cx.percent(wait))
        ),
        None => format!(
            "Devices wait {} for each other at collectives ({} of the steady state)",
            duration_ms(wait),
            pc(cx.percent(wait))
        ),
    };
    cx.finding(
        "stragglers",
        title,
        wait,
        evidence,
        vec![
            remedy(
                "Look at the late rank's host before its steps (its CPU threads in the report): data \
                 loading, garbage collection, logging, checkpoint writes, a slower or busier node",
                "a rank that is late at every collective is late before the step starts: the \
                 delay is on its host, and the others wait in the collective",
            ),
            remedy(
                "Give every rank the same work: balance input shards and sequence lengths, and \
                 keep per-rank work (evaluation, logging) off the step",
                "a collective finishes when its last rank arrives",
            ),
        ],
    )
}

/// A device late by less than this [µs] (median) is not named a straggler.
const LATE_US: f64 = 100.0;

/// A device late to most steps: at each step's first collective (where a rank late to the
/// step shows; later collectives then wait for nothing), else at most collectives.
pub(super) struct LateRank {
    pub device: i64,
    pub steps: f64,
    pub steps_last: f64,
    pub median_us: f64,
    pub max_us: f64,
    /// Its lateness summed over the steps it was last at [ms].
    pub late_ms: f64,
}

pub(super) fn late_rank(s: &Stragglers) -> Option<LateRank> {
    let share = |k: u64, n: u64| k as f64 / (n as f64).max(1.0);
    let by_step_share = |d: &DeviceRow| share(d.steps_last, d.steps);
    let devices = &s.per_device;
    let by_step = devices
        .iter()
        .filter(|d| d.steps > 0)
        .max_by(|a, b| by_step_share(a).total_cmp(&by_step_share(b)))
        .filter(|d| by_step_share(d) >= 0.5 && d.step_lateness_us_median >= LATE_US)
        .map(|d| LateRank {
            device: d.device as i64,
            steps: d.steps as f64,
            steps_last: d.steps_last as f64,
            median_us: d.step_lateness_us_median,
            max_us: d.step_lateness_us_max,
            late_ms: d.steps_late_ms,
        });
    let last_share = |d: &DeviceRow| share(d.times_last, d.instances);
    by_step.or_else(|| {
        devices
            .iter()
            .max_by(|a, b| last_share(a).total_cmp(&last_share(b)))
            .filter(|d| last_share(d) >= 0.5 && d.lateness_us_median >= LATE_US)
            .map(|d| LateRank {
                device: d.device as i64,
                steps: d.instances as f64,
                steps_last: d.times_last as f64,
                median_us: d.lateness_us_median,
                max_us: d.lateness_us_max,
                late_ms: 0.0,
            })
    })
}
