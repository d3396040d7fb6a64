//! `compare`'s settings as a pipeline file's `[compare]` table and the command line give
//! them.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::Deserialize;

use super::{Family, Settings};

/// Settings from a pipeline file's `[compare]` table, then the command line.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    /// Percent, for every family.
    pub threshold_percent: Option<f64>,
    /// Percent, per family (`{ module = 3, wait = 20 }`).
    #[serde(default)]
    pub thresholds_percent: BTreeMap<String, f64>,
    pub alpha: Option<f64>,
    pub min_samples: Option<usize>,
    pub gate: Option<Vec<String>>,
    pub resamples: Option<usize>,
}

impl SettingsFile {
    /// Apply on top of `s` (later files or flags override earlier ones).
    pub fn apply(&self, s: &mut Settings) -> Result<()> {
        if let Some(t) = self.threshold_percent {
            check_percent(t)?;
            for f in Family::ALL {
                s.thresholds.insert(f, t / 100.0);
            }
        }
        for (name, t) in &self.thresholds_percent {
            check_percent(*t)?;
            match name.split_once(':') {
                // One metric: `range:train_step`.
                Some((family, key)) if !key.is_empty() => {
                    let f = parse_family(family)?;
                    s.keyed.insert(format!("{}:{key}", f.name()), t / 100.0);
                }
                _ => {
                    s.thresholds.insert(parse_family(name)?, t / 100.0);
                }
            }
        }
        if let Some(a) = self.alpha {
            if !(a > 0.0 && a < 1.0) {
                bail!("alpha must be between 0 and 1 (got {a})");
            }
            s.alpha = a;
        }
        if let Some(m) = self.min_samples {
            s.min_samples = m;
        }
        if let Some(g) = &self.gate {
            s.gate = g
                .iter()
                .filter(|x| !x.is_empty() && x.as_str() != "none")
                .map(|x| parse_family(x))
                .collect::<Result<_>>()?;
        }
        if let Some(r) = self.resamples {
            if r < 100 {
                bail!("resamples must be at least 100 (got {r})");
            }
            s.stats.resamples = r;
        }
        Ok(())
    }
}

fn check_percent(t: f64) -> Result<()> {
    if !(t.is_finite() && t >= 0.0) {
        bail!("a threshold is a percentage >= 0 (got {t})");
    }
    Ok(())
}

pub fn parse_family(s: &str) -> Result<Family> {
    Family::parse(s).ok_or_else(|| {
        anyhow::anyhow!(
            "unknown metric {s:?} (metrics: {})",
            Family::ALL.map(|f| f.name()).join(", ")
        )
    })
}
