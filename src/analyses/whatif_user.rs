//! Scenarios a user gives `whatif` (`what-if --scenario`, or `--analysis whatif
//! --analysis-arg scenario=...`), read from text into typed ones (each error names the
//! scenario and what is wrong with it), and the changes they make to the step's paths
//! (docs/whatif.md, "Your own scenarios").

use serde::{Deserialize, Serialize};

use super::roofline_model::Roofline;
use super::whatif_scenarios::{Change, Kind, Path, on_time};
use crate::units::pct;

/// One user-given change to the step.
#[derive(Clone, Debug, PartialEq)]
pub enum UserScenario {
    /// `op:NAME=PCT%`: the op (HLO instruction) NAME at PCT % of its roof.
    Op { name: String, percent: f64 },
    /// `range:LABEL`: the host's time in the range LABEL out of the path (made ahead).
    Range { label: String },
    /// `on-time:DEVICE`: the device arriving with the others at every step.
    OnTime { device: i32 },
}

impl UserScenario {
    pub fn parse(text: &str) -> Result<UserScenario, String> {
        let t = text.trim();
        let bad = |why: &str| Err(format!("scenario `{t}`: {why}"));
        let Some((kind, rest)) = t.split_once(':') else {
            return bad("expected op:NAME=PCT%, range:LABEL or on-time:DEVICE");
        };
        let rest = rest.trim();
        match kind.trim() {
            "op" => {
                let Some((name, pct)) = rest.rsplit_once('=') else {
                    return bad("expected op:NAME=PCT% (e.g. op:fusion.3=80%)");
                };
                let pct = pct.trim().trim_end_matches('%').trim();
                match pct.parse::<f64>() {
                    Ok(p) if p > 0.0 && p <= 100.0 && !name.trim().is_empty() => {
                        Ok(UserScenario::Op {
                            name: name.trim().to_string(),
                            percent: p,
                        })
                    }
                    Ok(_) => bad("the share of the roof must be above 0 and at most 100 %"),
                    Err(_) => bad(&format!("`{pct}` is not a percentage")),
                }
            }
            "range" if !rest.is_empty() => Ok(UserScenario::Range {
                label: rest.to_string(),
            }),
            "range" => bad("expected range:LABEL (the NVTX range's name)"),
            "on-time" => match rest.parse::<i32>() {
                Ok(d) if d >= 0 => Ok(UserScenario::OnTime { device: d }),
                _ => bad(&format!("`{rest}` is not a device number")),
            },
            k => bad(&format!(
                "unknown kind `{k}` (op:NAME=PCT%, range:LABEL or on-time:DEVICE)"
            )),
        }
    }

    /// The text it was read from, canonical.
    pub fn text(&self) -> String {
        match self {
            UserScenario::Op { name, percent } => format!("op:{name}={percent}%"),
            UserScenario::Range { label } => format!("range:{label}"),
            UserScenario::OnTime { device } => format!("on-time:{device}"),
        }
    }
}

/// `whatif`'s parameters: the user's scenarios, `;`-separated in one text.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WhatIfParams {
    #[serde(default, with = "scenarios", skip_serializing_if = "Vec::is_empty")]
    pub scenario: Vec<UserScenario>,
}

/// Every scenario of a `;`-separated text.
pub fn parse_all(text: &str) -> Result<Vec<UserScenario>, String> {
    text.split(';')
        .filter(|s| !s.trim().is_empty())
        .map(UserScenario::parse)
        .collect()
}

mod scenarios {
    use super::{UserScenario, parse_all};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[UserScenario], s: S) -> Result<S::Ok, S::Error> {
        let texts: Vec<String> = v.iter().map(UserScenario::text).collect();
        s.serialize_str(&texts.join(";"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<UserScenario>, D::Error> {
        let text = String::deserialize(d)?;
        parse_all(&text).map_err(serde::de::Error::custom)
    }
}

/// The user's scenarios as changes (rule `user`); what they name that the profile lacks, as
/// notes.
pub(super) fn user_changes(
    paths: &[&Path],
    roofline: Option<&Roofline>,
    user: &[UserScenario],
    per_step: f64,
    notes: &mut Vec<String>,
) -> Vec<Change<'static>> {
    let mut out: Vec<Change> = Vec::new();
    for u in user {
        let text = u.text();
        match u {
            UserScenario::Op { name, percent } => {
                let ops: Vec<_> = roofline
                    .map_or(&[][..], |r| &r.ops[..])
                    .iter()
                    .filter(|o| o.thunk == *name)
                    .collect();
                let mut saved = 0.0;
                let mut unknown = 0;
                for o in &ops {
                    match o.roof_percent {
                        Some(now) if now < *percent => {
                            saved += o.time_ms * (1.0 - now / percent) * per_step;
                        }
                        Some(_) => {}
                        None => unknown += 1,
                    }
                }
                if ops.is_empty() {
                    notes.push(format!(
                        "{text}: the roofline has no op `{name}` (an HLO instruction's name, \
                         as the roofline's op table gives it); not predicted"
                    ));
                    continue;
                }
                if unknown == ops.len() {
                    notes.push(format!(
                        "{text}: `{name}` has no known roof (its FLOPs or bytes are unknown); \
                         not predicted"
                    ));
                    continue;
                }
                let now: Vec<String> = ops
                    .iter()
                    .filter_map(|o| o.roof_percent)
                    .map(|r| format!("{} %", pct(r)))
                    .collect();
                out.push((
                    "user".into(),
                    format!(
                        "`{name}` at {} % of its roof (now {})",
                        pct(*percent),
                        now.join(", ")
                    ),
                    Box::new(move |p: &mut Path| {
                        p.take(&Kind::Compute, saved);
                    }),
                ));
            }
            UserScenario::Range { label } => {
                let k = Kind::HostRange(label.clone());
                if !paths.iter().any(|p| p.get(&k) > 0.0) {
                    notes.push(format!(
                        "{text}: no time of the range `{label}` keeps the GPU waiting (it is \
                         not in the profile, has GPU work inside, or runs while the GPU \
                         works); not predicted"
                    ));
                    continue;
                }
                out.push((
                    "user".into(),
                    format!("the host's `{label}` done before the step needs it"),
                    Box::new(move |p: &mut Path| {
                        p.take(&k, f64::INFINITY);
                    }),
                ));
            }
            UserScenario::OnTime { device } => {
                let Some(who) = paths.iter().map(|p| p.who).find(|w| w.1 == *device) else {
                    notes.push(format!(
                        "{text}: the profile has no device {device}; not predicted"
                    ));
                    continue;
                };
                out.push((
                    "user".into(),
                    format!("device {device} (process {}) on time", who.0),
                    Box::new(move |p: &mut Path| on_time(p, who)),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_read_back_as_written() {
        let v = parse_all("op:fusion.3=80%; range:load_batch;on-time:1").unwrap();
        assert_eq!(
            v,
            [
                UserScenario::Op {
                    name: "fusion.3".into(),
                    percent: 80.0
                },
                UserScenario::Range {
                    label: "load_batch".into()
                },
                UserScenario::OnTime { device: 1 },
            ]
        );
        let p = WhatIfParams { scenario: v };
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(
            json,
            r#"{"scenario":"op:fusion.3=80%;range:load_batch;on-time:1"}"#
        );
        assert_eq!(serde_json::from_str::<WhatIfParams>(&json).unwrap(), p);
        assert_eq!(
            serde_json::to_string(&WhatIfParams::default()).unwrap(),
            "{}"
        );
    }

    #[test]
    fn each_mistake_is_named() {
        for (text, says) in [
            ("fusion.3", "expected op:NAME=PCT%"),
            ("op:fusion.3", "op:NAME=PCT%"),
            ("op:fusion.3=120%", "at most 100"),
            ("op:fusion.3=fast", "`fast` is not a percentage"),
            ("range:", "range:LABEL"),
            ("on-time:gpu1", "`gpu1` is not a device"),
            ("faster:everything", "unknown kind `faster`"),
        ] {
            let e = UserScenario::parse(text).unwrap_err();
            assert!(e.contains(says) && e.contains(text), "{text}: {e}");
        }
        let e = serde_json::from_str::<WhatIfParams>(r#"{"scenario":"op:x=0%"}"#).unwrap_err();
        assert!(e.to_string().contains("above 0"), "{e}");
    }
}
