//! The rules of `diagnose` (docs/diagnosis.md: what each measures, its threshold, why, the
//! remedies). A rule reads the results of the other analyses, typed as their files hold them
//! (the contracts users read too, read back whole), and says either what it found or why it
//! could not judge; it never fires on data it does not have.

mod collectives;
mod compile;
pub mod finding;
mod flops;
mod hardware;
mod idle;
mod memory;

use collectives::{exposed_communication, slow_collectives, stragglers};
use compile::{compile_time, recompilation};
use flops::{attention, wasted_flops};
use hardware::{host_device_copies, precision};
use idle::{capture, host_bound, idle_in_modules};
use memory::memory;

pub use finding::{Check, Context, Finding, Inputs, Outcome, Rule, Severity};

/// Every rule, in the order their checks are listed.
pub const RULES: &[(&str, Rule)] = &[
    ("capture", capture),
    ("host-bound", host_bound),
    ("idle-in-modules", idle_in_modules),
    ("exposed-communication", exposed_communication),
    ("slow-collectives", slow_collectives),
    ("stragglers", stragglers),
    ("recompilation", recompilation),
    ("compile-time", compile_time),
    ("precision", precision),
    ("wasted-flops", wasted_flops),
    ("attention", attention),
    ("memory", memory),
    ("host-device-copies", host_device_copies),
];

/// Every rule on `ins`: the findings (by time at stake, then severity) and each rule's check.
pub fn run(ins: &Inputs) -> (Vec<Finding>, Vec<Check>) {
    let cx = Context::of(ins);
    let mut findings = Vec::new();
    let mut checks = Vec::new();
    for (id, rule) in RULES {
        let (status, why) = match rule(ins, &cx) {
            Outcome::Fired(f) => {
                let why = f.title.clone();
                findings.push(f);
                ("fired", why)
            }
            Outcome::Quiet(w) => ("quiet", w),
            Outcome::NoData(w) => ("no data", w),
        };
        checks.push(Check {
            rule: id.to_string(),
            status: status.to_string(),
            why,
        });
    }
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.at_stake_ms.total_cmp(&a.at_stake_ms))
    });
    (findings, checks)
}
