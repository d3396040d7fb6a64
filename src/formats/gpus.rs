//! What a GPU can do at most: dense FLOP/s per math unit and memory bandwidth, for a device
//! the report names (`device-metadata.parquet`: name, SM count, clock, memory bandwidth)
//! (docs/design.md, "Peaks").
//!
//! Peaks are arithmetic, not looked-up numbers: SMs × dense operations per SM per clock (by
//! architecture and math unit, [`ARCHITECTURES`]) × the clock the vendor's dense figures are
//! quoted at (per product, [`PRODUCTS`]; the report's `clockRate` is the maximum boost
//! clock, which for Hopper is above the clock NVIDIA's tensor figures use). Memory bandwidth
//! is the report's `memoryBandwidth` when it has one, else the product's. The vector units
//! (FP32, FP64) use the same clock, so their peaks can be a few per cent under the
//! datasheets' (which quote them at the maximum boost clock).

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::hlo::cost::Math;

/// Dense operations per SM per clock of one architecture, by math unit (0: none).
#[derive(Clone, Copy, Debug)]
pub struct Architecture {
    pub name: &'static str,
    /// Compute capability major.minor it covers.
    pub capability: (u32, u32),
    pub fp8: u32,
    pub int8: u32,
    /// bf16 and f16 (the same rate).
    pub f16: u32,
    pub tf32: u32,
    pub f32: u32,
    pub f64: u32,
}

/// The architectures' dense tensor and vector rates (NVIDIA's architecture white papers).
pub const ARCHITECTURES: &[Architecture] = &[
    Architecture {
        name: "Ampere (GA100)",
        capability: (8, 0),
        fp8: 0,
        int8: 4096,
        f16: 2048,
        tf32: 1024,
        f32: 128,
        f64: 128,
    },
    Architecture {
        name: "Ada (AD102)",
        capability: (8, 9),
        fp8: 2048,
        int8: 2048,
        f16: 1024,
        tf32: 512,
        f32: 256,
        f64: 4,
    },
    Architecture {
        name: "Hopper (GH100)",
        capability: (9, 0),
        fp8: 8192,
        int8: 8192,
        f16: 4096,
        tf32: 2048,
        f32: 256,
        f64: 256,
    },
    Architecture {
        name: "Blackwell (GB100)",
        capability: (10, 0),
        fp8: 16384,
        int8: 16384,
        f16: 8192,
        tf32: 4096,
        f32: 256,
        f64: 128,
    },
];

/// A product: how its name appears in reports, its architecture, SMs, the clock its dense
/// figures are quoted at, and its memory bandwidth.
#[derive(Clone, Copy, Debug)]
pub struct Product {
    /// Substrings of the device name, all of which must appear.
    pub matches: &'static [&'static str],
    pub capability: (u32, u32),
    pub sms: u32,
    pub clock_mhz: u32,
    pub memory_gb_s: f64,
    /// NVLink bandwidth per direction, GB/s (what a collective's bus bandwidth approaches
    /// within a node); None for parts without NVLink on board (PCIe cards).
    pub nvlink_gb_s: Option<f64>,
}

/// Products, most specific first (GH200 before H200 before H100).
pub const PRODUCTS: &[Product] = &[
    Product {
        matches: &["A100", "SXM", "80GB"],
        capability: (8, 0),
        sms: 108,
        clock_mhz: 1410,
        memory_gb_s: 2039.0,
        nvlink_gb_s: Some(300.0),
    },
    Product {
        matches: &["A100", "SXM"],
        capability: (8, 0),
        sms: 108,
        clock_mhz: 1410,
        memory_gb_s: 1555.0,
        nvlink_gb_s: Some(300.0),
    },
    Product {
        matches: &["A100", "80GB", "PCIe"],
        capability: (8, 0),
        sms: 108,
        clock_mhz: 1410,
        memory_gb_s: 1935.0,
        nvlink_gb_s: None,
    },
    Product {
        matches: &["A100"],
        capability: (8, 0),
        sms: 108,
        clock_mhz: 1410,
        memory_gb_s: 1555.0,
        nvlink_gb_s: None,
    },
    Product {
        matches: &["GH200"],
        capability: (9, 0),
        sms: 132,
        clock_mhz: 1830,
        memory_gb_s: 4000.0,
        nvlink_gb_s: Some(450.0),
    },
    Product {
        matches: &["H200"],
        capability: (9, 0),
        sms: 132,
        clock_mhz: 1830,
        memory_gb_s: 4800.0,
        nvlink_gb_s: Some(450.0),
    },
    Product {
        matches: &["H100", "PCIe"],
        capability: (9, 0),
        sms: 114,
        clock_mhz: 1620,
        memory_gb_s: 2000.0,
        nvlink_gb_s: None,
    },
    Product {
        matches: &["H100"],
        capability: (9, 0),
        sms: 132,
        clock_mhz: 1830,
        memory_gb_s: 3350.0,
        nvlink_gb_s: Some(450.0),
    },
    Product {
        matches: &["B200"],
        capability: (10, 0),
        sms: 148,
        clock_mhz: 1856,
        memory_gb_s: 8000.0,
        nvlink_gb_s: Some(900.0),
    },
    Product {
        matches: &["L40S"],
        capability: (8, 9),
        sms: 142,
        clock_mhz: 2520,
        memory_gb_s: 864.0,
        nvlink_gb_s: None,
    },
];

/// The NVLink bandwidth per direction (GB/s) of the device named `name`, when its product
/// is in [`PRODUCTS`] and has NVLink.
pub fn nvlink_gb_s(name: &str) -> Option<f64> {
    PRODUCTS
        .iter()
        .find(|p| p.matches.iter().all(|m| name.contains(m)))
        .and_then(|p| p.nvlink_gb_s)
}

/// A device's peaks and where they come from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Peaks {
    pub device: String,
    /// Dense TFLOP/s by math unit (units the device lacks are absent).
    pub tflops: Vec<(Math, f64)>,
    pub memory_gb_s: f64,
    /// How they were found, in a sentence.
    pub source: String,
}

#[cfg(test)]
impl Peaks {
    pub fn tflops(&self, math: Math) -> Option<f64> {
        self.tflops
            .iter()
            .find(|(m, _)| *m == math)
            .map(|(_, t)| *t)
    }
}

/// What the report says of a device (`TARGET_INFO_GPU`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceFacts {
    pub name: String,
    pub sms: Option<u32>,
    pub capability: Option<(u32, u32)>,
    /// Bytes per second.
    pub memory_bandwidth: Option<f64>,
    /// The device's memory, bytes.
    #[serde(default)]
    pub memory_bytes: Option<f64>,
}

/// The peaks of the device `facts` describe: None when neither its name nor its compute
/// capability is in the tables (no guess).
pub fn peaks(facts: &DeviceFacts) -> Option<Peaks> {
    let product = PRODUCTS
        .iter()
        .find(|p| p.matches.iter().all(|m| facts.name.contains(m)))
        .filter(|p| facts.capability.is_none_or(|c| c == p.capability))?;
    let arch = ARCHITECTURES
        .iter()
        .find(|a| a.capability == product.capability)?;
    // The report's SM count wins (a product with SMs disabled, a MIG slice).
    let sms = facts.sms.filter(|&n| n > 0).unwrap_or(product.sms);
    let per_clock = |ops: u32| sms as f64 * ops as f64 * product.clock_mhz as f64 * 1e6 / 1e12;
    let tflops: Vec<(Math, f64)> = [
        (Math::Fp8, arch.fp8),
        (Math::Int8, arch.int8),
        (Math::Bf16, arch.f16),
        (Math::F16, arch.f16),
        (Math::Tf32, arch.tf32),
        (Math::F32, arch.f32),
        (Math::F64, arch.f64),
    ]
    .into_iter()
    .filter(|(_, ops)| *ops > 0)
    .map(|(m, ops)| (m, per_clock(ops)))
    .collect();
    let (memory_gb_s, memory_from) = match facts.memory_bandwidth.filter(|&b| b > 0.0) {
        Some(b) => (b / 1e9, "the report's memory bandwidth"),
        None => (product.memory_gb_s, "the product's memory bandwidth"),
    };
    Some(Peaks {
        device: facts.name.clone(),
        tflops,
        memory_gb_s,
        source: format!(
            "{} SMs × dense operations per SM per clock of {} by math unit × {} MHz; \
             {memory_from}",
            sms, arch.name, product.clock_mhz
        ),
    })
}

/// `--peak`: peaks given by the user, over the device's. TFLOP/s per math unit; `hbm` in GB/s.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PeakOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f16: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f32: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f64: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hbm: Option<f64>,
}

impl PeakOverride {
    /// The peaks given, by math unit (None: the memory bandwidth).
    pub fn entries(&self) -> Vec<(Option<Math>, f64)> {
        [
            (Some(Math::Fp8), self.fp8),
            (Some(Math::Int8), self.int8),
            (Some(Math::Bf16), self.bf16),
            (Some(Math::F16), self.f16),
            (Some(Math::Tf32), self.tf32),
            (Some(Math::F32), self.f32),
            (Some(Math::F64), self.f64),
            (None, self.hbm),
        ]
        .into_iter()
        .filter_map(|(m, v)| Some((m, v?)))
        .collect()
    }

    /// Set one entry from `NAME=VALUE` (as `--peak` takes it).
    pub fn set(&mut self, arg: &str) -> Result<()> {
        let Some((k, v)) = arg.split_once('=') else {
            anyhow::bail!("--peak {arg}: expected NAME=VALUE (e.g. bf16=989 or hbm=3350)");
        };
        let v: f64 = v
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x > 0.0)
            .ok_or_else(|| anyhow::anyhow!("--peak {arg}: the value must be a positive number"))?;
        let slot = match k.trim() {
            "fp8" => &mut self.fp8,
            "int8" => &mut self.int8,
            "bf16" => &mut self.bf16,
            "f16" => &mut self.f16,
            "tf32" => &mut self.tf32,
            "f32" => &mut self.f32,
            "f64" => &mut self.f64,
            "hbm" => &mut self.hbm,
            other => anyhow::bail!(
                "--peak {arg}: unknown name {other:?} (fp8, int8, bf16, f16, tf32, f32, f64 in \
                 TFLOP/s; hbm in GB/s)"
            ),
        };
        *slot = Some(v);
        Ok(())
    }
}

/// The name of a math unit as tables print it (`vector` for FLOPs outside matmuls).
pub fn math_name(m: Option<Math>) -> &'static str {
    match m {
        Some(Math::Fp8) => "fp8",
        Some(Math::Int8) => "int8",
        Some(Math::Bf16) => "bf16",
        Some(Math::F16) => "f16",
        Some(Math::Tf32) => "tf32",
        Some(Math::F32) => "f32",
        Some(Math::F64) => "f64",
        None => "vector",
    }
}

/// The peaks used, and where they come from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PeaksUsed {
    pub device: String,
    pub tflops: BTreeMap<Math, f64>,
    pub memory_gb_s: Option<f64>,
    pub source: String,
    /// What `--peak` set.
    pub overridden: Vec<String>,
    /// The device's memory (bytes; the smallest of the run's GPUs), when the report says.
    #[serde(default)]
    pub memory_bytes: Option<f64>,
}

impl PeaksUsed {
    pub fn compute(&self, math: Option<Math>) -> Option<f64> {
        self.tflops.get(&math.unwrap_or(Math::F32)).copied()
    }
}

/// The peaks of a run's devices (the first the tables know), `--peak`'s over them; `ran`:
/// whether any op ran (a run without one needs no peaks, nor a note about them).
pub fn peaks_used<'a>(
    devices: impl Iterator<Item = &'a DeviceFacts>,
    ran: bool,
    over: &PeakOverride,
    notes: &mut Vec<String>,
) -> Option<PeaksUsed> {
    let mut names: Vec<&DeviceFacts> = Vec::new();
    for d in devices {
        if !names.iter().any(|n| n.name == d.name) {
            names.push(d);
        }
    }
    if names.len() > 1 {
        notes.push(format!(
            "the run's GPUs differ ({}); the roofline uses the first's peaks",
            names
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let found: Option<Peaks> = names.iter().find_map(|d| peaks(d));
    let overrides = over.entries();
    let mut used = match (&found, names.first()) {
        (Some(p), _) => PeaksUsed {
            device: p.device.clone(),
            tflops: p.tflops.iter().copied().collect(),
            memory_gb_s: Some(p.memory_gb_s),
            source: p.source.clone(),
            overridden: vec![],
            memory_bytes: None,
        },
        (None, first) => {
            let device = first.map_or("unknown GPU".to_string(), |d| d.name.clone());
            if overrides.is_empty() && first.is_none() && ran {
                notes.push(
                    "the archive says nothing of its GPUs (no device metadata): achieved rates \
                     only; give the peaks with --peak (e.g. --peak bf16=989 --peak hbm=3350)"
                        .to_string(),
                );
                return None;
            }
            if overrides.is_empty() && !ran {
                return None;
            }
            if overrides.is_empty() {
                notes.push(format!(
                    "no peaks for {device} (not in the table of GPUs): achieved rates only; \
                     give them with --peak (e.g. --peak bf16=989 --peak hbm=3350)"
                ));
                return None;
            }
            PeaksUsed {
                device,
                tflops: BTreeMap::new(),
                memory_gb_s: None,
                source: "--peak".to_string(),
                overridden: vec![],
                memory_bytes: None,
            }
        }
    };
    used.memory_bytes = names
        .iter()
        .filter_map(|d| d.memory_bytes)
        .min_by(f64::total_cmp);
    for (m, v) in overrides {
        match m {
            Some(m) => {
                used.tflops.insert(m, v);
                used.overridden.push(format!("{}={v}", math_name(Some(m))));
            }
            None => {
                used.memory_gb_s = Some(v);
                used.overridden.push(format!("hbm={v}"));
            }
        }
    }
    Some(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(name: &str, sms: Option<u32>, bw: Option<f64>) -> Peaks {
        peaks(&DeviceFacts {
            name: name.into(),
            sms,
            capability: None,
            memory_bandwidth: bw,
            memory_bytes: None,
        })
        .unwrap_or_else(|| panic!("{name}"))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 0.005 * b
    }

    /// Each row against the vendor's published dense figures (data sheets: H100 SXM bf16
    /// 989 TFLOP/s, FP8 1979, TF32 495, 3.35 TB/s; H200 the same compute, 4.8 TB/s; A100 SXM
    /// bf16 312, TF32 156, FP64 tensor 19.5, 1.555 / 2.039 TB/s; H100 PCIe bf16 756, 2 TB/s;
    /// B200 bf16 2250, FP8 4500; L40S bf16 362, FP8 733, 864 GB/s).
    #[test]
    fn peaks_are_the_published_dense_figures() {
        let h100 = of("NVIDIA H100 80GB HBM3", None, None);
        for (m, want) in [
            (Math::Bf16, 989.4),
            (Math::Fp8, 1978.9),
            (Math::Tf32, 494.7),
        ] {
            assert!(
                close(h100.tflops(m).unwrap(), want),
                "{m:?} {:?}",
                h100.tflops
            );
        }
        assert_eq!(h100.memory_gb_s, 3350.0);
        let h200 = of("NVIDIA H200", None, None);
        assert!(close(h200.tflops(Math::Bf16).unwrap(), 989.4));
        assert_eq!(h200.memory_gb_s, 4800.0);
        let a100 = of("NVIDIA A100-SXM4-40GB", None, None);
        for (m, want) in [(Math::Bf16, 312.0), (Math::Tf32, 156.0), (Math::F64, 19.5)] {
            assert!(
                close(a100.tflops(m).unwrap(), want),
                "{m:?} {:?}",
                a100.tflops
            );
        }
        assert_eq!(a100.tflops(Math::Fp8), None, "Ampere has no FP8 units");
        assert_eq!(a100.memory_gb_s, 1555.0);
        assert_eq!(of("NVIDIA A100-SXM4-80GB", None, None).memory_gb_s, 2039.0);
        assert!(close(
            of("NVIDIA H100 PCIe", None, None)
                .tflops(Math::Bf16)
                .unwrap(),
            756.0
        ));
        let b200 = of("NVIDIA B200", None, None);
        assert!(close(b200.tflops(Math::Bf16).unwrap(), 2250.0));
        assert!(close(b200.tflops(Math::Fp8).unwrap(), 4500.0));
        // L40S: FP8 733 at the 2,520 MHz boost clock; its bf16 figure, 362, is quoted a
        // little lower (1.2 %).
        let l40s = of("NVIDIA L40S", None, None);
        assert!(
            close(l40s.tflops(Math::Fp8).unwrap(), 733.0),
            "{:?}",
            l40s.tflops
        );
        let bf16 = l40s.tflops(Math::Bf16).unwrap();
        assert!((bf16 - 362.0).abs() < 0.015 * 362.0, "{bf16}");
        assert!(
            of("NVIDIA GH200 480GB", None, None)
                .source
                .contains("1830 MHz")
        );
    }

    /// The report's facts win over the product's: its memory bandwidth (the pax archives'
    /// A100-SXM4-40GB: 1,555.2 GB/s), its SM count; an unknown device or a name whose
    /// capability disagrees gets no peaks.
    #[test]
    fn the_report_wins_and_unknown_devices_get_none() {
        let p = of(
            "NVIDIA A100-SXM4-40GB",
            Some(108),
            Some(1_555_200_000_000.0),
        );
        assert_eq!(p.memory_gb_s, 1555.2);
        assert!(p.source.contains("the report's memory bandwidth"));
        let mig = of("NVIDIA H100 80GB HBM3", Some(66), None);
        assert!(close(mig.tflops(Math::Bf16).unwrap(), 989.4 / 2.0));
        assert!(
            peaks(&DeviceFacts {
                name: "Tesla T4".into(),
                ..Default::default()
            })
            .is_none()
        );
        let wrong = DeviceFacts {
            name: "NVIDIA H100 80GB HBM3".into(),
            capability: Some((8, 0)),
            ..Default::default()
        };
        assert!(peaks(&wrong).is_none());
    }
}
